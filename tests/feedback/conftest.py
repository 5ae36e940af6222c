"""Shared fixtures of the evaluator tests: one compile cache for the whole run, the ReLU problem.

The cache is KERNEL_REFINE_CACHE when set (CI points it at one directory for the whole run), else
the evaluator's default cache, so builds are shared between tests and between runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from feedback.options import EvalOptions, default_cache_dir
from problems.record import Problem
from problems.spec import select

sys.path.insert(0, str(Path(__file__).parent))  # tests/feedback/candidates.py


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    path = default_cache_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def relu() -> Problem:
    """level1/19 (ReLU on signed inputs, so ReLU is not the identity); tests use its small size."""
    return select("suite:level1/19").problems[0]


@pytest.fixture(scope="session")
def fast_options(cache_dir) -> EvalOptions:
    """Small size, few timed trials: the statuses are the point here, not the numbers. The
    default warm-up, so that the CLI's evaluation with `--timing-trials 20` (test_gpu_cli.py)
    finds the baselines these options measured (a baseline's cache key holds the timing knobs)."""
    return EvalOptions(size="small", cache_dir=cache_dir, timing_trials=20,
                       run_timeout_s=120, device="cuda:0")


@pytest.fixture(scope="session")
def gpu_options(fast_options) -> EvalOptions:
    """The GPU tests' options (test_gpu*.py): fast_options on cuda:0, room for cold builds."""
    return fast_options.model_copy(update={"device": "cuda:0", "run_timeout_s": 40,
                                           "compile_timeout_s": 600})


@pytest.fixture
def holds(monkeypatch) -> list[dict]:
    """Every hold of a lock by the evaluator's jobs (feedback.job.locked), in order: shared or
    not, when it was had and when let go."""
    import contextlib
    import time

    from feedback import job

    found, real = [], job.locked

    @contextlib.contextmanager
    def traced(path, shared=False):
        with real(path, shared):
            hold = {"shared": shared, "got": time.time()}
            found.append(hold)
            try:
                yield
            finally:
                hold["left"] = time.time()

    monkeypatch.setattr(job, "locked", traced)
    return found
