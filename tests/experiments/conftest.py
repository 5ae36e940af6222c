"""Fixtures for the experiments tests.

FABRICATED DATA: the EvalResults built here are invented to give the metrics known answers; they
were never measured and are labelled `fixture` in their environment and messages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.records import Attempt, Candidate, RunRecord, Usage
from agent.store import RunStore
from feedback.result import Environment, EvalResult, Status, TimingStats

AUTO = object()
FIXTURE_ENV = Environment(device="fixture (fabricated)", torch="fixture", python="fixture")


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, std_ms=0.0, min_ms=ms, max_ms=ms, n=10,
                       clock="host_wall")


def make_attempt(problem: str = "level1/1_a", index: int = 0, turn: int = 0, status: str = "ok",
                 eager: float | None = None, compile: float | None = None,
                 runtime_ms: float | None | object = AUTO, noise: float | None = None,
                 code: str | None = "class ModelNew: pass", run_id: str = "fixture",
                 prompt_tokens: int = 100, completion_tokens: int = 50,
                 cost: float | None = 0.01, gpu_seconds: float = 2.0) -> Attempt:
    """A fabricated attempt. `eager`/`compile` are speedups; status `no_code` gives result None.

    The eager reference takes 1 ms, so the runtime defaults to 1 / eager (1 ms when unmeasured).
    """
    if runtime_ms is AUTO:
        runtime_ms = 1.0 / eager if eager else 1.0
    candidate = Candidate(problem_id=problem, run_id=run_id, index=index, turn=turn,
                          model="fixture", template_hash="fixture", response="fixture response",
                          code=None if status == "no_code" else code,
                          usage=Usage(prompt_tokens=prompt_tokens,
                                      completion_tokens=completion_tokens, cost_usd=cost,
                                      latency_s=1.0))
    if status == "no_code":
        return Attempt(candidate=candidate, result=None, gpu_seconds=0.0)
    ok = status == "ok"
    result = EvalResult(
        status=Status(status), backend="cpp", problem_id=problem, code_hash=f"h{index}{turn}",
        message="" if ok else "fixture failure", stage=None if ok else "compile",
        runtime=timing(runtime_ms) if ok and runtime_ms is not None else None,
        eager=timing(runtime_ms * eager) if ok and eager and runtime_ms else None,
        speedup_eager=eager if ok else None, speedup_compile=compile if ok else None,
        noise=noise, environment=FIXTURE_ENV)
    return Attempt(candidate=candidate, result=result, gpu_seconds=gpu_seconds)


def make_store(path: Path, mode: str, config: dict, attempts: list[Attempt],
               run_id: str = "fixture") -> RunStore:
    store = RunStore.create(path, RunRecord(run_id=run_id, mode=mode, config=config))
    for a in attempts:
        store.write_attempt(a)
    return store


@pytest.fixture
def attempt():
    return make_attempt


@pytest.fixture
def store_factory():
    return make_store
