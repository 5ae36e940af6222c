"""The evaluator on a real GPU (opt-in: `pytest -m gpu`): the cpp pipeline's cases for cuda and
triton, and a kernel that makes an illegal memory access followed by a correct one in one batch
(the command line on the GPU: test_gpu_cli.py, a file of its own so a parallel run starts it at
once).

Each backend's cases run as one evaluate_many batch (one GPU worker, builds in the CPU pool).
"""

from __future__ import annotations

import pytest
from candidates import BROKEN_CUDA, cuda_candidate, triton_candidate

from feedback.evaluate import evaluate_many
from feedback.result import EvalResult, Status

pytestmark = pytest.mark.gpu

EXPECTED = {"relu": Status.ok, "relu_wrong": Status.mismatch, "relu_flat": Status.shape_mismatch,
            "broken": Status.compile_error, "wild": Status.runtime_error, "hang": Status.timeout,
            "leave": Status.runtime_error}


def cuda_code(name: str) -> str:
    return cuda_candidate(source=BROKEN_CUDA) if name == "broken" else cuda_candidate(name)


CODE = {"cuda": cuda_code, "triton": triton_candidate}
GPU_FIXTURES = [("suite:level1/19", CODE[b](n), b) for b in CODE for n in EXPECTED]


@pytest.fixture(scope="module", params=["cuda", "triton"])
def batch(request, relu, gpu_options) -> tuple[str, dict[str, EvalResult]]:
    backend = request.param
    names = list(EXPECTED)
    options = gpu_options
    results = evaluate_many([(relu, CODE[backend](n), backend) for n in names], options,
                            devices=["cuda:0"])
    return backend, dict(zip(names, results))


def test_every_case_gets_its_status(batch):
    backend, results = batch
    got = {n: r.status for n, r in results.items()}
    assert got == EXPECTED, {n: (r.status, r.message[:300]) for n, r in results.items()}


def test_correct_kernel_is_timed_with_cuda_events_and_baselines(batch):
    backend, results = batch
    r = results["relu"]
    assert r.runtime.clock == "cuda_events" and 20 <= r.runtime.n <= 80  # grown until sure
    assert r.speedup_eager is not None and r.eager.clock == "cuda_events"
    assert r.environment.device.startswith("NVIDIA") and r.environment.driver
    assert r.roofline is not None and r.roofline.sol_ms is not None and not r.roofline.suspicious
    # the SM clock at the start and end of timing, read through NVML (diagnoses clock drift)
    assert r.runtime.sm_clock_mhz is not None and all(m > 100 for m in r.runtime.sm_clock_mhz)


def test_failure_messages_name_the_cause(batch):
    backend, results = batch
    assert "illegal memory access" in results["wild"].message.lower() or \
        "SIG" in results["wild"].message, results["wild"].message
    assert "timed out" in results["hang"].message
    # ended by the worker's device-wait limit, long before the job's run limit
    assert "after its forward() returned" in results["hang"].message, results["hang"].message
    assert "without a valid report" in results["leave"].message
    broken = results["broken"].message
    assert ("cuda.cu(" in broken and "undefined_value" in broken) if backend == "cuda" else broken


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_illegal_memory_access_then_a_correct_kernel_in_one_batch(relu, gpu_options, backend):
    items = [(relu, CODE[backend]("wild"), backend), (relu, CODE[backend]("relu"), backend)]
    bad, good = evaluate_many(items, gpu_options.model_copy(update={"time": False}),
                              devices=["cuda:0"], compile_workers=1)
    assert bad.status == Status.runtime_error
    assert good.status == Status.ok and good.correctness.trials_passed == good.correctness.trials

