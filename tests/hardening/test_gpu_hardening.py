"""The corpus on a real GPU (opt-in: `pytest -m gpu tests/hardening`): CUDA and Triton exploits of
the classes where the device matters (side streams, stale device memory, partial writes, silent
launch failures, illegal memory accesses, library calls, fallbacks); the faults batch of 50 is
test_gpu_faults.py (a file of its own, so a parallel run starts it at once).

One CUDA extension and one Triton file serve every case (gpu_corpus.py).
"""

from __future__ import annotations

import pytest
from gpu_corpus import cuda_candidate, triton_candidate
from hardkit import problem_of

from feedback.evaluate import evaluate_many
from feedback.result import EvalResult, Status

pytestmark = pytest.mark.gpu

GV, MM, RT, TO, OK = (Status.guard_violation, Status.mismatch, Status.runtime_error, Status.timeout,
                      Status.ok)
CASES = {
    # name: (backend, code, status, words)
    "cuda_honest": ("cuda", cuda_candidate("return ops.relu(x)"), OK, ""),
    "cuda_side_stream": ("cuda", cuda_candidate("return ops.relu_side_stream(x)"), OK, ""),
    "cuda_stale_device_memory": ("cuda", cuda_candidate("return ops.relu_nowrite(x)"), MM, "poison"),
    "cuda_partial_write": ("cuda", cuda_candidate("return ops.relu_half(x)"), MM, "poison"),
    # a 4096-thread block: CUDA 12 names it "invalid configuration argument", CUDA 13 (seen on the
    # H200, 2026-12-01) "invalid argument"; the status is the point, the words name a CUDA error
    "cuda_silent_launch_failure": ("cuda", cuda_candidate("return ops.relu_bad_launch(x)"), RT,
                                   "CUDA error: invalid"),
    "cuda_illegal_access": ("cuda", cuda_candidate("return ops.relu_wild(x)"), RT, "illegal memory access"),
    "cuda_late_host_thread": ("cuda", cuda_candidate("return ops.relu_late_thread(x)"), GV, "background"),
    "cuda_library_relu": ("cuda", cuda_candidate("return ops.relu_lib(x)"), GV, "aten::relu"),
    "cuda_fallback": ("cuda", cuda_candidate("return torch.relu(x) if x.numel() < (1 << 40) else ops.relu(x)"),
                      GV, "own compiled code did not run"),
    "triton_honest": ("triton", triton_candidate("return launch(x, x.numel())"), OK, ""),
    "triton_partial_write": ("triton", triton_candidate("return launch(x, x.numel() // 2)"), MM, "poison"),
    "triton_fallback": ("triton", triton_candidate("return torch.relu(x) if x.numel() < (1 << 40) else "
                                                   "launch(x, x.numel())"), GV, "own compiled code did not run"),
    "triton_illegal_access": ("triton", triton_candidate("return launch(x, x.numel(), 1 << 40)"), RT,
                              "illegal memory access"),
}

# every source of the corpus, built first by `make gpu-check` (tests/gpu_fixtures.py)
GPU_FIXTURES = [("suite:level1/19", code, backend) for backend, code, _, _ in CASES.values()]


@pytest.fixture(scope="module")
def results(gpu_options) -> dict[str, EvalResult]:
    relu = problem_of("suite:level1/19")
    items = [(relu, code, backend) for backend, code, _, _ in CASES.values()]
    return dict(zip(CASES, evaluate_many(items, gpu_options, devices=["cuda:0"])))


@pytest.mark.parametrize("name", list(CASES))
def test_gpu_case(results, name):
    _, _, status, words = CASES[name]
    r = results[name]
    assert r.status == status, f"{r.status.value} at {r.stage}: {r.message[:1500]}"
    assert words in r.message, r.message[:1500]


def test_side_stream_work_is_inside_the_timed_window(results):
    """relu_side_stream spins ~2 ms on a stream of its own and returns at once: the device-wide
    synchronize before the end event puts that work in the measurement."""
    honest, side = results["cuda_honest"], results["cuda_side_stream"]
    assert side.runtime.median_ms > honest.runtime.median_ms + 1.0, (side.runtime, honest.runtime)


def test_own_kernels_are_seen_for_cuda_and_triton(results):
    for name in ("cuda_honest", "triton_honest"):
        assert results[name].status == OK and results[name].correctness.trials_passed >= 6
