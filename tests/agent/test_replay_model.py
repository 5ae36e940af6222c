"""The `replay:` model: recorded responses through the same litellm path as a real model."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from agent.llm import LLMError, ReplayKey, make_client
from agent.records import Attempt, Candidate, RunRecord
from agent.replay import ReplayBook, ReplayError
from agent.store import RunStore

MESSAGES = [{"role": "user", "content": "write ModelNew"}]


def write_jsonl(path: Path, entries: list[dict | str]) -> Path:
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in entries))
    return path


def entry(problem: str, index: int, turn: int, response: str) -> dict:
    return {"problem": problem, "index": index, "turn": turn, "response": response}


def replay(client, *key):
    return asyncio.run(client.complete(MESSAGES, key=ReplayKey(*key)))


def test_jsonl_responses_are_replayed_by_key_with_usage_counted(tmp_path):
    source = write_jsonl(tmp_path / "r.jsonl", [
        entry("level1/19_relu", 0, 0, "first answer"),
        entry("level1/19_relu", 0, 1, "a much longer second answer " * 20),
        {**entry("level1/19_relu", 1, 0, "other trajectory"), "note": "demo, not a real model"},
    ])
    llm = make_client(f"replay:{source}")
    first, second = replay(llm, "level1/19_relu", 0, 0), replay(llm, "level1/19_relu", 0, 1)
    assert first.text == "first answer"
    assert replay(llm, "level1/19_relu", 1, 0).text == "other trajectory"
    assert 0 < first.usage.completion_tokens < second.usage.completion_tokens
    assert first.usage.prompt_tokens > 0
    assert first.usage.cost_usd is None  # a replay has no price: None, never a guess
    assert first.finish_reason == "stop"


def test_replay_goes_through_litellm(tmp_path, monkeypatch):
    import litellm

    seen = []
    original = litellm.acompletion

    async def spy(**kwargs):
        seen.append(kwargs)
        return await original(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    llm = make_client(f"replay:{write_jsonl(tmp_path / 'r.jsonl', [entry('p', 0, 0, 'x')])}")
    assert replay(llm, "p", 0, 0).text == "x"
    assert len(seen) == 1 and seen[0]["messages"] == MESSAGES and "mock_response" in seen[0]


def test_missing_entry_names_the_key_and_the_file(tmp_path):
    source = write_jsonl(tmp_path / "r.jsonl", [entry("p", 0, 0, "x")])
    with pytest.raises(LLMError) as caught:
        replay(make_client(f"replay:{source}"), "p", 0, 3)
    message = str(caught.value)
    assert "problem='p'" in message and "index=0" in message and "turn=3" in message
    assert str(source) in message


@pytest.mark.parametrize("bad_line, complaint", [
    ('{"problem": "p", "index": 0, "turn": 1, "response": ', "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"problem": "p", "index": "0", "turn": 1, "response": "x"}', "'index' must be int"),
    ('{"problem": "p", "index": 0, "turn": 1}', "'response' must be str, got missing"),
    ('{"problem": "p", "index": 0, "turn": -1, "response": "x"}', ">= 0"),
    (json.dumps(entry("p", 0, 0, "again")), "duplicate entry"),
])
def test_malformed_line_is_reported_with_its_line_number(tmp_path, bad_line, complaint):
    source = write_jsonl(tmp_path / "r.jsonl", [entry("p", 0, 0, "x"), "", bad_line])
    with pytest.raises(LLMError) as caught:
        make_client(f"replay:{source}")
    assert f"{source}:3" in str(caught.value) and complaint in str(caught.value)


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(LLMError, match="does not exist"):
        make_client(f"replay:{tmp_path / 'nope.jsonl'}")
    with pytest.raises(LLMError, match="not a run directory"):
        make_client(f"replay:{tmp_path}")


def test_a_stored_run_is_replayed(tmp_path):
    run = tmp_path / "run"
    store = RunStore.create(run, RunRecord(run_id="r1", mode="refine", config={}))
    for turn, response in enumerate(["turn zero", "turn one, no code"]):
        store.write_attempt(Attempt(candidate=Candidate(
            problem_id="level2/1_conv", run_id="r1", index=2, turn=turn, model="openai/x",
            template_hash="h", response=response, code=None)))
    book = ReplayBook.load(run)
    assert len(book) == 2
    llm = make_client(f"replay:{run}")
    assert replay(llm, "level2/1_conv", 2, 1).text == "turn one, no code"
    with pytest.raises(LLMError, match="turn=2"):
        replay(llm, "level2/1_conv", 2, 2)


def test_simulated_latency_and_concurrency(tmp_path):
    source = write_jsonl(tmp_path / "r.jsonl", [entry("p", i, 0, f"answer {i}") for i in range(6)])
    llm = make_client(f"replay:{source}", llm_args={"replay_latency_s": 0.2}, concurrency=3)

    async def all_six():
        return await asyncio.gather(*(llm.complete(MESSAGES, key=("p", i, 0)) for i in range(6)))

    start = time.monotonic()
    completions = asyncio.run(all_six())
    elapsed = time.monotonic() - start
    assert [c.text for c in completions] == [f"answer {i}" for i in range(6)]
    assert 0.4 <= elapsed < 1.5  # two waves of three
    assert all(c.usage.latency_s >= 0.2 for c in completions)


def test_book_errors_are_value_errors_without_litellm(tmp_path):
    with pytest.raises(ReplayError):
        ReplayBook({}, "nowhere").response(ReplayKey("p", 0, 0))
