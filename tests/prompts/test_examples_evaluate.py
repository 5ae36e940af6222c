"""The one-shot examples are correct answers: the real evaluator accepts each on its backend.

A prompt that shows the model a broken example teaches it to break things, so the examples are
run like candidates: the cpp one on any machine (a real compile: `slow`), the CUDA and Triton
ones on a GPU (opt-in: `pytest -m gpu`).
"""

from __future__ import annotations

import pytest

from feedback.evaluate import evaluate
from feedback.options import EvalOptions
from feedback.result import Status
from problems.record import Problem
from prompts import example_source

ADD = Problem(id="examples/add", level=1, number=0, name="add", source=example_source("reference"),
              origin="prompts/examples/add_reference.py")
GPU_FIXTURES = [(ADD, example_source("cuda"), "cuda")]  # built first by `make gpu-check`
QUICK = {"timing_trials": 5, "warmup": 1, "compile_baseline": False}


def _gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.slow
def test_cpp_example_passes_the_evaluator():
    result = evaluate(ADD, example_source("cpp"), "cpp", EvalOptions(**QUICK))
    assert result.status == Status.ok, result.message
    assert result.correctness.trials_passed == result.correctness.trials


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_gpu_examples_pass_the_evaluator(backend):
    result = evaluate(ADD, example_source(backend), backend, EvalOptions(**QUICK))
    assert result.status == Status.ok, result.message
    assert result.speedup_eager is not None
