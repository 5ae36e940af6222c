"""Shared fixtures of the hardening corpus: the evaluator's options, the faults batch.

The compile cache is KERNEL_REFINE_CACHE when set (CI points it at one directory), else the
evaluator's default; every corpus candidate shares one C++ extension build (corpus.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))

from hardkit import problem_of

from feedback.options import EvalOptions, default_cache_dir


@pytest.fixture(scope="session")
def base_options() -> EvalOptions:
    cache = default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    return EvalOptions(size="small", cache_dir=cache, run_timeout_s=60,
                       memory_limit_mb=6000)


@pytest.fixture(scope="session")
def gpu_options(base_options) -> EvalOptions:
    """The GPU corpus's options (test_gpu_hardening.py, test_gpu_faults.py)."""
    return base_options.model_copy(update={"device": "cuda:0", "run_timeout_s": 60,
                                           "timing_trials": 50, "warmup": 5, "baselines": False,
                                           "compile_timeout_s": 900})


@pytest.fixture(scope="session")
def fault_batch(base_options):
    """The 50-candidate batch of test_faults_cpp.py (the limits' candidates are part of it)."""
    import time

    from faults import BATCH_OPTIONS, FAULTS, MARKER

    from feedback.evaluate import evaluate_many

    MARKER.unlink(missing_ok=True)
    options = base_options.model_copy(update=BATCH_OPTIONS)
    items = [(problem_of(f.problem), f.code, "cpp") for f in FAULTS]
    start = time.monotonic()
    results = evaluate_many(items, options, compile_workers=2)
    return results, time.monotonic() - start
