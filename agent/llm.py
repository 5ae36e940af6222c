"""The LLM client: the only module that imports litellm.

One path serves every model: hosted APIs and local OpenAI-compatible servers (vLLM, SGLang,
Ollama) through `litellm.acompletion`, and the offline `replay:` model, whose recorded text is
handed to the same call as litellm's `mock_response`, so tests and demos run the real code.

Failures split in two. Transient ones (rate limits, timeouts, connection errors, 5xx) are
retried with exponential backoff and jitter; fatal ones (authentication, bad request, context
window, model not found) fail at once with a `FatalLLMError` naming the model and the reason,
because retrying them only burns time and money. Fatal is decided by the error's class, its
text (litellm reports a key the client refused to send as a 500) and its HTTP status.

What a preflight asks of the model lives here too: the credentials litellm says it needs
(`missing_credentials`), its provider, limits and prices (`model_facts`), token counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import weakref
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch prices at import

import litellm
import structlog
import tenacity
from litellm.litellm_core_utils.exception_mapping_utils import ExceptionCheckers
from litellm.utils import should_retry

from agent.records import Usage
from agent.replay import ReplayBook, ReplayError, ReplayKey

litellm.suppress_debug_info = True

__all__ = ["Completion", "ContextWindowError", "FatalLLMError", "LLMClient", "LLMError",
           "ModelFacts", "ReplayKey", "RetriesExhaustedError", "count_tokens", "make_client",
           "missing_credentials", "model_facts", "parse_llm_args", "resolve_model"]

MODEL_ENV = "KERNEL_REFINE_MODEL"
REPLAY_PREFIX = "replay:"
# litellm needs a provider even for `mock_response` (which sends nothing); the name is in no
# price table, so replayed cost is None.
REPLAY_LITELLM_MODEL = "openai/replay"
REPLAY_LATENCY_ARG = "replay_latency_s"
_RESERVED_ARGS = {"model", "messages", "stream", "n", "mock_response", "timeout", "num_retries",
                  "max_retries"}

log = structlog.get_logger(__name__)


class LLMError(RuntimeError):
    """Any failure to get a completion; the message names the model and the reason."""


class FatalLLMError(LLMError):
    """A failure that retrying cannot fix (auth, bad request, context window, unknown model)."""


class ContextWindowError(FatalLLMError):
    """This prompt is too long for the model: fatal for its trajectory, not for the run."""


class RetriesExhaustedError(LLMError):
    """A transient failure (rate limit, timeout, 5xx) that persisted through every retry."""


@dataclass(frozen=True)
class Completion:
    """The text of one completion and what it cost."""

    text: str
    usage: Usage
    finish_reason: str | None = None
    """`stop`, `length` (truncated by max tokens) ..., as the provider reports it."""


_FATAL_REASONS: tuple[tuple[type[Exception], str], ...] = (
    (litellm.ContextWindowExceededError, "the prompt exceeds the model's context window"),
    (litellm.AuthenticationError, "authentication failed: check the provider's API key"),
    (litellm.PermissionDeniedError, "permission denied: the key may not use this model"),
    (litellm.NotFoundError, "model not found: check the model string and api_base"),
    (litellm.UnprocessableEntityError, "the provider rejected the request as malformed"),
    (litellm.BadRequestError, "bad request: the provider rejected the request"),
)
_FATAL_STATUS = {401: _FATAL_REASONS[1][1], 403: _FATAL_REASONS[2][1], 404: _FATAL_REASONS[3][1],
                 413: "the request is too large for the provider"}
_CONTEXT_REASON = _FATAL_REASONS[0][1]
# litellm wraps a key the client library refused before sending (no OPENAI_API_KEY) as an
# InternalServerError (500), and some proxies answer a bad key with a 5xx: the text tells.
_CREDENTIAL_MARKERS = ("missing credentials", "api key", "api_key", "unauthorized",
                       "authentication")
_TRANSIENT = (litellm.RateLimitError, litellm.Timeout, litellm.APIConnectionError,
              litellm.ServiceUnavailableError, litellm.InternalServerError,
              litellm.BadGatewayError, asyncio.TimeoutError)


def _fatal(error: BaseException) -> tuple[type[FatalLLMError], str] | None:
    """(error kind, reason) when no retry can fix ERROR, whatever class litellm gave it."""
    if isinstance(error, litellm.ContextWindowExceededError):
        return ContextWindowError, _CONTEXT_REASON
    reason = next((reason for kind, reason in _FATAL_REASONS if isinstance(error, kind)), None)
    if reason is not None:
        return FatalLLMError, reason
    if isinstance(error, (litellm.RateLimitError, litellm.Timeout, asyncio.TimeoutError)):
        return None
    text = str(error).lower()
    if ExceptionCheckers.is_error_str_context_window_exceeded(text):
        return ContextWindowError, _CONTEXT_REASON
    if any(marker in text for marker in _CREDENTIAL_MARKERS):
        return FatalLLMError, "credentials missing or rejected: check the provider's API key"
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and 400 <= status < 500 and not should_retry(status):
        return FatalLLMError, _FATAL_STATUS.get(status, _FATAL_REASONS[5][1])
    return None


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: rate limits, timeouts, connection errors, 5xx."""
    if _fatal(error) is not None:
        return False
    if isinstance(error, _TRANSIENT):
        return True
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and should_retry(status)


def _retry_after_s(error: BaseException | None) -> float | None:
    """The server's Retry-After hint, in seconds, when it sent one."""
    headers = getattr(getattr(error, "response", None), "headers", None)
    try:
        return float(headers.get("retry-after")) if headers else None
    except (TypeError, ValueError):
        return None


class LLMClient:
    """Async completions for one model, with a concurrency limit, retries and accounting.

    Build it with `make_client`. `complete` may be awaited from many tasks at once; at most
    `concurrency` requests are in flight (a request waiting out its backoff holds no slot).
    """

    def __init__(self, model: str, *, llm_args: dict[str, Any] | None = None,
                 concurrency: int = 8, timeout_s: float = 600, max_retries: int = 6,
                 backoff_initial_s: float = 1.0, backoff_max_s: float = 60.0,
                 replay: ReplayBook | None = None):
        if concurrency < 1 or timeout_s <= 0 or max_retries < 0:
            raise ValueError("need concurrency >= 1, timeout_s > 0 and max_retries >= 0")
        self.model = model
        self.llm_args = dict(llm_args or {})
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.replay = replay
        self._backoff = tenacity.wait_exponential_jitter(
            multiplier=backoff_initial_s, max=backoff_max_s, jitter=backoff_initial_s)
        self._backoff_max_s = backoff_max_s
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._semaphores = weakref.WeakKeyDictionary()

    async def complete(self, messages: list[dict[str, str]], *, key: ReplayKey,
                       temperature: float | None = None) -> Completion:
        """One completion of MESSAGES (OpenAI-style). KEY picks the replayed response; real
        models ignore it, and replay ignores TEMPERATURE (None = the provider's default).

        Raises:
            FatalLLMError: auth, bad request, context window, unknown model: not retried.
            RetriesExhaustedError: a transient failure outlived `max_retries` retries.
            LLMError: anything else (a replay key that is not recorded, an unexpected error).
        """
        start = time.monotonic()
        request = self._request(messages, ReplayKey(*key), temperature)
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1), wait=self._wait,
            retry=tenacity.retry_if_exception(is_transient), reraise=True,
            before_sleep=self._log_retry)
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._send(request)
        except Exception as error:
            raise self._wrap(error, retrying.statistics.get("attempt_number", 1)) from error
        return self._completion(response, messages, latency_s=time.monotonic() - start)

    def _request(self, messages: list[dict[str, str]], key: ReplayKey,
                 temperature: float | None) -> dict[str, Any]:
        if self.replay is None:
            request = {**self.llm_args, "model": self.model, "messages": messages,
                       "timeout": self.timeout_s, "num_retries": 0, "max_retries": 0}
            if temperature is not None:
                request["temperature"] = temperature
            return request
        try:
            text = self.replay.response(key)
        except ReplayError as e:
            raise LLMError(f"model {self.model!r}: {e}") from None
        usage = _count_usage(REPLAY_LITELLM_MODEL, messages, text)
        return {"model": REPLAY_LITELLM_MODEL, "messages": messages,
                "mock_delay": self.llm_args.get(REPLAY_LATENCY_ARG),
                "mock_response": {"model": REPLAY_LITELLM_MODEL, "usage": usage, "choices": [
                    {"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}]}}

    async def _send(self, request: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.setdefault(loop, asyncio.Semaphore(self.concurrency))
        async with semaphore:
            # litellm's own timeout bounds each read; this bounds the whole request.
            return await asyncio.wait_for(litellm.acompletion(**request), self.timeout_s)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        hint = _retry_after_s(error) or 0.0
        return min(max(self._backoff(state), hint), self._backoff_max_s)

    def _log_retry(self, state: tenacity.RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.warning("llm.retry", model=self.model, attempt=state.attempt_number,
                    error=type(error).__name__, wait_s=round(state.upcoming_sleep, 3))

    def _wrap(self, error: Exception, attempts: int) -> LLMError:
        if isinstance(error, LLMError):
            return error
        detail = f"{type(error).__name__}: {str(error).strip()[:600]}"
        fatal = _fatal(error)
        if fatal is not None:
            kind, reason = fatal
            return kind(f"model {self.model!r}: {reason} ({detail})")
        if is_transient(error):
            if isinstance(error, asyncio.TimeoutError):
                detail = f"no response within timeout_s={self.timeout_s}"
            return RetriesExhaustedError(
                f"model {self.model!r}: still failing after {attempts} attempts ({detail})")
        return LLMError(f"model {self.model!r}: unexpected error ({detail})")

    def _completion(self, response: Any, messages: list[dict[str, str]],
                    latency_s: float) -> Completion:
        choice = response.choices[0]
        text = getattr(choice.message, "content", None) or ""
        usage = getattr(response, "usage", None)
        if usage is None or not getattr(usage, "prompt_tokens", None):
            # Some local servers omit usage: count the text with litellm's tokenizer instead,
            # and price nothing (a cost from estimated tokens would be a guess).
            counted = _count_usage(self.model, messages, text)
            prompt, completion = counted["prompt_tokens"], counted["completion_tokens"]
            cost = None
        else:
            prompt, completion = usage.prompt_tokens, usage.completion_tokens or 0
            cost = _cost_usd(response)
        return Completion(
            text=text, finish_reason=getattr(choice, "finish_reason", None),
            usage=Usage(prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost,
                        latency_s=latency_s))


def _count_usage(model: str, messages: list[dict[str, str]], text: str) -> dict[str, int]:
    prompt = litellm.token_counter(model=model, messages=messages)
    completion = litellm.token_counter(model=model, text=text, count_response_tokens=True)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


def _cost_usd(response: Any) -> float | None:
    """litellm's priced cost of RESPONSE, or None when the model is not in its table."""
    try:
        cost = litellm.completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 (unmapped model, odd provider: unknown, never a guess)
        return None
    return float(cost) if cost is not None else None


def resolve_model(model: str | None) -> str:
    """MODEL, else $KERNEL_REFINE_MODEL; a clear LLMError when neither is set."""
    resolved = (model or os.environ.get(MODEL_ENV) or "").strip()
    if not resolved:
        raise LLMError(f"no model given: pass a litellm model string (e.g. 'openai/gpt-4o', or "
                       f"'openai/NAME' with api_base for a local server), 'replay:FILE.jsonl' "
                       f"for recorded responses, or set {MODEL_ENV}")
    return resolved


def make_client(model: str | None, *, llm_args: dict[str, Any] | None = None,
                concurrency: int = 8, timeout_s: float = 600, max_retries: int = 6,
                backoff_initial_s: float = 1.0, backoff_max_s: float = 60.0) -> LLMClient:
    """The client for MODEL: a litellm model string, or `replay:FILE.jsonl` / `replay:RUN_DIR`.

    Args:
        llm_args: provider options passed through to `litellm.acompletion` (`api_base`,
            `reasoning_effort`, `max_tokens`...). For replay only `replay_latency_s` counts: a
            simulated latency per call, for scheduler benchmarks.
        concurrency: requests in flight at once.
        timeout_s: bound on one request; a timeout is retried.
        max_retries: retries of transient failures after the first attempt.
        backoff_initial_s, backoff_max_s: exponential backoff (with jitter) between retries.
    """
    model = resolve_model(model)
    args = dict(llm_args or {})
    reserved = sorted(_RESERVED_ARGS & args.keys())
    if reserved:
        raise LLMError(f"llm args {reserved} are set by the client itself (use the model "
                       "argument, timeout_s and max_retries instead)")
    replay = None
    if model.startswith(REPLAY_PREFIX):
        try:
            replay = ReplayBook.load(model[len(REPLAY_PREFIX):])
        except ReplayError as e:
            raise LLMError(f"model {model!r}: {e}") from None
    else:
        _check_provider(model, args)
    return LLMClient(model, llm_args=args, concurrency=concurrency, timeout_s=timeout_s,
                     max_retries=max_retries, backoff_initial_s=backoff_initial_s,
                     backoff_max_s=backoff_max_s, replay=replay)


def _check_provider(model: str, args: dict[str, Any]) -> str:
    """MODEL's provider; fails before the first turn, not at it, when litellm cannot route it."""
    try:
        return litellm.get_llm_provider(model, custom_llm_provider=args.get("custom_llm_provider"),
                                        api_base=args.get("api_base"))[1]
    except Exception as e:  # litellm raises several kinds here
        raise FatalLLMError(
            f"model {model!r}: litellm cannot tell which provider serves it; write provider/model"
            " (e.g. 'openai/gpt-4o', or 'hosted_vllm/NAME' with api_base=http://HOST:PORT/v1 "
            f"for a local server) ({type(e).__name__})") from e


def missing_credentials(model: str, llm_args: dict[str, Any] | None = None) -> list[str]:
    """The environment variables litellm says MODEL needs and finds unset (none for replay,
    none when LLM_ARGS give what they would hold: api_key, api_base, api_version)."""
    if model.startswith(REPLAY_PREFIX):
        return []
    args = llm_args or {}
    report = litellm.validate_environment(model=model, api_key=args.get("api_key"),
                                          api_base=args.get("api_base"),
                                          api_version=args.get("api_version"))
    return [] if report.get("keys_in_environment") else list(report.get("missing_keys") or [])


@dataclass(frozen=True)
class ModelFacts:
    """What litellm's table knows of a model; None where it does not say."""

    provider: str | None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    input_usd_per_token: float | None = None
    output_usd_per_token: float | None = None


def model_facts(model: str, llm_args: dict[str, Any] | None = None) -> ModelFacts:
    """MODEL's provider, token limits and prices (replay: no provider, nothing known)."""
    if model.startswith(REPLAY_PREFIX):
        return ModelFacts(provider=None)
    provider = _check_provider(model, llm_args or {})
    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 (not in the table: a local or new model, limits unknown)
        return ModelFacts(provider)
    return ModelFacts(provider, info.get("max_input_tokens"), info.get("max_output_tokens"),
                      info.get("input_cost_per_token"), info.get("output_cost_per_token"))


def count_tokens(model: str, messages: list[dict[str, str]]) -> int:
    """Prompt tokens of MESSAGES by litellm's tokenizer for MODEL (a generic one if unknown)."""
    name = REPLAY_LITELLM_MODEL if model.startswith(REPLAY_PREFIX) else model
    return litellm.token_counter(model=name, messages=messages)


def parse_llm_args(items: list[str] | None) -> dict[str, Any]:
    """`["reasoning_effort=high", "max_tokens=8192"]` -> {"reasoning_effort": "high",
    "max_tokens": 8192}: values are JSON when they parse as JSON, else strings."""
    args: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"llm arg {item!r} must look like NAME=VALUE")
        try:
            args[name.strip()] = json.loads(value)
        except json.JSONDecodeError:
            args[name.strip()] = value
    return args
