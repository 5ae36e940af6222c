"""50 candidates on one GPU (opt-in: `pytest -m gpu tests/hardening`): honest kernels among
illegal accesses, hangs, segfaults, exits and memory hogs, in one `evaluate_many` batch; a fault
never poisons the next candidate's context. Its own file: the longest GPU test, so a parallel run
(`make gpu-check`) starts it first rather than after the rest of the corpus.
"""

from __future__ import annotations

import time

import pytest
from gpu_corpus import cuda_candidate, triton_candidate
from hardkit import problem_of

from feedback.evaluate import evaluate_many
from feedback.result import Status

pytestmark = pytest.mark.gpu

RT, TO, OK = Status.runtime_error, Status.timeout, Status.ok

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

GPU_FIXTURES = sorted({("suite:level1/19", code, backend) for _, backend, code, _, _ in GPU_FAULTS})


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
