"""The corpus on a real GPU (opt-in: `pytest -m gpu tests/hardening`): CUDA and Triton exploits of
the classes where the device matters (side streams, stale device memory, partial writes, silent
launch failures, illegal memory accesses, library calls, fallbacks), and a faults batch of 50.

One CUDA extension and one Triton file serve every case (gpu_corpus.py).
"""

from __future__ import annotations

import time

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


@pytest.fixture(scope="module")
def gpu_options(base_options):
    return base_options.model_copy(update={"device": "cuda:0", "run_timeout_s": 60,
                                           "timing_trials": 50, "warmup": 5, "baselines": False,
                                           "compile_timeout_s": 900})


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


GPU_FAULTS = (
    [("honest", "cuda", cuda_candidate("return ops.relu(x)\n# batch"), OK, "")] * 12
    + [("honest", "triton", triton_candidate("return launch(x, x.numel())\n# batch"), OK, "")] * 12
    + [("illegal access", "cuda", cuda_candidate("return ops.relu_wild(x)"), RT, "illegal memory access")] * 6
    + [("illegal access", "triton", triton_candidate("return launch(x, x.numel(), 1 << 40)"), RT,
        "illegal memory access")] * 4
    + [("hang", "cuda", cuda_candidate("return ops.hang(x)"), TO, "timed out")] * 3
    + [("segfault", "cuda", cuda_candidate("return ops.crash(x)"), RT, "SIGSEGV")] * 3
    + [("exit", "cuda", cuda_candidate("os._exit(0)"), RT, "forged or missing result")] * 3
    + [("host memory", "cuda", cuda_candidate("y = torch.ones(3 << 29)\nreturn ops.relu(x)"), RT,
        "memory limit")] * 3
    + [("device memory", "cuda", cuda_candidate("y = torch.empty(1 << 42, device=x.device)\n"
                                                "return ops.relu(x)"), RT, "out of memory")] * 2
    + [("exception", "triton", triton_candidate("raise RuntimeError('bad grid')"), RT, "bad grid")] * 2
)
assert len(GPU_FAULTS) == 50


def test_gpu_faults_batch(gpu_options):
    """50 candidates on one GPU: illegal accesses never poison the next candidate's context."""
    relu = problem_of("suite:level1/19")
    options = gpu_options.model_copy(update={"time": False, "run_timeout_s": 30,
                                             "memory_limit_mb": 6000})
    order = sorted(range(50), key=lambda i: (i * 7) % 50)  # faults spread through the batch
    start = time.monotonic()
    got = evaluate_many([(relu, GPU_FAULTS[i][2], GPU_FAULTS[i][1]) for i in order], options,
                        devices=["cuda:0"])
    wall = time.monotonic() - start
    wrong = [(GPU_FAULTS[i][0], GPU_FAULTS[i][1], r.status.value, r.message[:200])
             for i, r in zip(order, got) if r.status != GPU_FAULTS[i][3] or GPU_FAULTS[i][4] not in r.message]
    assert not wrong, wrong
    device = sum(r.stage_seconds.get("correct", 0.0) for r in got)
    builds = sum(r.stage_seconds.get("compile", 0.0) for r in got)
    print(f"\nGPU batch of 50: {wall:.0f} s wall, correctness children {device:.0f} s, builds {builds:.0f} s")
    assert wall <= device + builds + 60
