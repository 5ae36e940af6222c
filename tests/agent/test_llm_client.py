"""The LLM client through real litellm against the fake OpenAI-compatible server on 127.0.0.1.

Requests are counted server-side, so "retried" and "not retried" are facts, not mock calls.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from agent.fake_server import CONTEXT_MESSAGE, FakeOpenAIServer, Reply
from agent.llm import (
    ContextWindowError,
    FatalLLMError,
    LLMClient,
    LLMError,
    ReplayKey,
    RetriesExhaustedError,
    make_client,
    missing_credentials,
    model_facts,
    parse_llm_args,
    resolve_model,
)

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "one two three"}]
KEY = ReplayKey("level1/1_add", 0, 0)


def client(server: FakeOpenAIServer, model: str = "openai/fake-model", **kw) -> LLMClient:
    options = {"max_retries": 3, "backoff_initial_s": 0.01, "backoff_max_s": 0.05, **kw}
    llm_args = {"api_base": server.api_base, "api_key": "sk-fake", **options.pop("llm_args", {})}
    return make_client(model, llm_args=llm_args, **options)


def complete(server: FakeOpenAIServer, **kw):
    return asyncio.run(client(server, **kw).complete(MESSAGES, key=KEY))


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_transient_error_is_retried_then_succeeds(status):
    with FakeOpenAIServer([Reply.http_error(status), Reply.ok("fine now")]) as server:
        completion = complete(server)
    assert completion.text == "fine now"
    assert server.request_count == 2


@pytest.mark.parametrize("reply, reason", [
    (Reply.http_error(401), "authentication failed"),
    (Reply.context_exceeded(), "context window"),
    (Reply.http_error(404), "model not found"),
    (Reply.http_error(400, "Unrecognized request argument supplied: foo"), "bad request"),
])
def test_fatal_error_fails_at_once_naming_model_and_reason(reply, reason):
    with (
        FakeOpenAIServer([reply], default=Reply.ok("never reached")) as server,
        pytest.raises(FatalLLMError) as caught,
    ):
        complete(server)
    assert server.request_count == 1
    assert "openai/fake-model" in str(caught.value) and reason in str(caught.value)
    assert isinstance(caught.value, ContextWindowError) == (reason == "context window")


@pytest.mark.parametrize("reply, kind, reason", [
    (Reply.http_error(500, CONTEXT_MESSAGE), ContextWindowError, "context window"),
    (Reply.http_error(500, "Incorrect API key provided: sk-fake."), FatalLLMError, "credentials"),
    (Reply.http_error(403, "This key may not use the model."), FatalLLMError, "permission"),
    (Reply.http_error(413, "Body exceeds the server limit."), FatalLLMError, "too large"),
])
def test_fatal_error_wrapped_as_another_class_is_not_retried(reply, kind, reason):
    """litellm maps these to InternalServerError (a 5xx) or a bare APIError: still fatal."""
    with (
        FakeOpenAIServer([reply], default=Reply.ok("never reached")) as server,
        pytest.raises(kind, match=reason),
    ):
        complete(server)
    assert server.request_count == 1


def test_missing_api_key_fails_at_once_without_a_request(monkeypatch):
    """No OPENAI_API_KEY: the openai client refuses to send and litellm calls it a 500."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer() as server:
        llm = LLMClient("openai/fake-model", llm_args={"api_base": server.api_base},
                        max_retries=3, backoff_initial_s=1.0)
        start = time.monotonic()
        with pytest.raises(FatalLLMError, match="credentials.*OPENAI_API_KEY"):
            asyncio.run(llm.complete(MESSAGES, key=KEY))
    assert server.request_count == 0 and time.monotonic() - start < 1.0


def test_missing_credentials_names_the_variables_litellm_asks_for(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert missing_credentials("openai/gpt-4o") == ["OPENAI_API_KEY"]
    assert missing_credentials("anthropic/claude-sonnet-4-5") == ["ANTHROPIC_API_KEY"]
    assert missing_credentials("openai/gpt-4o", {"api_key": "sk-given"}) == []
    assert missing_credentials("replay:experiments/demo/demo.jsonl") == []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert missing_credentials("openai/gpt-4o") == []


def test_model_facts_come_from_litellm_table():
    facts = model_facts("openai/gpt-4o")
    assert facts.provider == "openai" and facts.max_input_tokens and facts.max_output_tokens
    assert facts.input_usd_per_token and facts.output_usd_per_token
    local = model_facts("hosted_vllm/mine", {"api_base": "http://127.0.0.1:1/v1"})
    assert local.provider == "hosted_vllm" and local.max_input_tokens is None


def test_persistent_5xx_gives_up_after_max_retries():
    with (
        FakeOpenAIServer(default=Reply.http_error(500)) as server,
        pytest.raises(RetriesExhaustedError, match="after 3 attempts"),
    ):
        complete(server, max_retries=2)
    assert server.request_count == 3


def test_slow_reply_times_out_and_is_retried():
    with FakeOpenAIServer([Reply.ok("too late", delay_s=5)], default=Reply.ok("quick")) as server:
        start = time.monotonic()
        completion = complete(server, timeout_s=0.3)
    assert completion.text == "quick"
    assert server.request_count == 2
    assert time.monotonic() - start < 3


def test_timeouts_that_persist_are_reported_as_such():
    with (
        FakeOpenAIServer(default=Reply.ok("too late", delay_s=5)) as server,
        pytest.raises(RetriesExhaustedError, match="timeout"),
    ):
        complete(server, timeout_s=0.2, max_retries=1)
    assert server.request_count == 2


def test_retry_after_header_is_honoured():
    with FakeOpenAIServer([Reply.http_error(429, headers={"retry-after": "0.4"}),
                           Reply.ok()]) as server:
        start = time.monotonic()
        complete(server, backoff_max_s=2)
    assert time.monotonic() - start >= 0.4
    assert server.request_count == 2


def test_usage_comes_from_the_response_and_unknown_cost_is_none():
    with FakeOpenAIServer([Reply.ok("a b c d e")]) as server:
        completion = complete(server)
    # the fake server counts words: 2 + 3 in the prompt, 5 in the reply
    assert completion.usage.prompt_tokens == 5
    assert completion.usage.completion_tokens == 5
    assert completion.usage.cost_usd is None
    assert completion.usage.latency_s > 0
    assert completion.finish_reason == "stop"


def test_cost_comes_from_litellm_price_table_for_a_known_model():
    with FakeOpenAIServer([Reply.ok("a b c d e")]) as server:
        completion = complete(server, model="openai/gpt-4o")
    assert completion.usage.cost_usd is not None and completion.usage.cost_usd > 0


def test_missing_usage_is_counted_from_the_text_and_not_priced():
    reply = Reply(content="a b c d e " * 20, usage=False)
    with FakeOpenAIServer([reply]) as server:
        completion = complete(server, model="openai/gpt-4o")
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens >= 50
    assert completion.usage.cost_usd is None


def test_provider_options_and_temperature_pass_through():
    with FakeOpenAIServer() as server:
        llm = client(server, llm_args={"top_p": 0.5, "max_tokens": 77})
        asyncio.run(llm.complete(MESSAGES, key=KEY, temperature=0.3))
    body = server.requests[0]
    assert body["model"] == "fake-model" and body["messages"] == MESSAGES
    assert (body["top_p"], body["max_tokens"], body["temperature"]) == (0.5, 77, 0.3)


@pytest.mark.parametrize("concurrency", [2, 5])
def test_concurrency_limit_is_honoured(concurrency):
    with FakeOpenAIServer(default=Reply.ok("slow", delay_s=0.25)) as server:
        llm = client(server, concurrency=concurrency)

        async def many():
            return await asyncio.gather(*(llm.complete(MESSAGES, key=KEY) for _ in range(8)))

        results = asyncio.run(many())
    assert len(results) == 8 and server.request_count == 8
    assert server.max_in_flight == concurrency


def test_client_survives_several_event_loops():
    with FakeOpenAIServer() as server:
        llm = client(server, concurrency=1)
        for _ in range(2):
            assert asyncio.run(llm.complete(MESSAGES, key=KEY)).text == "ok"


def test_parse_llm_args_reads_json_values_else_strings():
    assert parse_llm_args(["reasoning_effort=high", "api_base=http://localhost:8000/v1",
                           "max_tokens=8192", "temperature=0.5", "drop_params=true",
                           'extra_body={"top_k": 20}', "stop=null"]) == {
        "reasoning_effort": "high", "api_base": "http://localhost:8000/v1", "max_tokens": 8192,
        "temperature": 0.5, "drop_params": True, "extra_body": {"top_k": 20}, "stop": None}
    assert parse_llm_args(None) == {}
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_llm_args(["reasoning_effort"])


def test_missing_model_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("KERNEL_REFINE_MODEL", raising=False)
    for empty in (None, "", "  "):
        with pytest.raises(LLMError, match="KERNEL_REFINE_MODEL"):
            make_client(empty)
    monkeypatch.setenv("KERNEL_REFINE_MODEL", "openai/from-env")
    assert resolve_model(None) == "openai/from-env"
    assert make_client(None).model == "openai/from-env"


def test_llm_args_cannot_override_what_the_client_sets():
    with pytest.raises(LLMError, match="model"):
        make_client("openai/x", llm_args={"model": "other"})
    with pytest.raises(ValueError):
        make_client("openai/x", concurrency=0)


def test_unroutable_model_string_fails_before_any_request():
    with pytest.raises(FatalLLMError, match="provider/model"):
        make_client("no-such-model-anywhere")
    assert make_client("hosted_vllm/my-model", llm_args={"api_base": "http://127.0.0.1:1/v1"})
