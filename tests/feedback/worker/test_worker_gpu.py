"""The worker on a CUDA GPU (opt-in: `pytest -m gpu`): events, L2 flush, poison, side streams,
own-kernel attribution for CUDA and Triton candidates, and a fatal kernel in a child process."""

from __future__ import annotations

import statistics

import pytest
import torch

from feedback.options import EvalOptions
from feedback.result import Status

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

SCALE = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2.0
def get_inputs():
    return [torch.randn(1 << 24)]
def get_init_inputs():
    return []
"""

CHAIN = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, a):
        for _ in range(8):
            a = torch.tanh(a @ a) * 0.5
        return a
def get_inputs():
    return [torch.randn(2048, 2048) / 45.0]
def get_init_inputs():
    return []
"""

SIDE_STREAM = """
import torch, torch.nn as nn
STREAM = None
class ModelNew(nn.Module):
    def forward(self, a):
        global STREAM
        STREAM = STREAM or torch.cuda.Stream()
        STREAM.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(STREAM):      # returns before the work is done
            for _ in range(8):
                a = torch.tanh(a @ a) * 0.5
        return a
"""

SAME_STREAM = SIDE_STREAM.replace("with torch.cuda.stream(STREAM):", "if True:")


def test_cuda_event_timing_is_sane(kit):
    report = kit.run("time", SCALE, "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                     "    def forward(self, x):\n        return x + x\n", backend="cuda",
                     timing_trials=100, warmup=5)
    assert report.status == Status.ok, report.message
    t = report.timing
    assert t.clock == "cuda_events" and t.n == 100
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms < 50
    assert report.noise is not None and report.noise < 0.5
    assert report.environment.device.startswith("NVIDIA")


def test_l2_flush_sends_reads_to_memory():
    from feedback.worker.clocks import CudaClock

    device = torch.device("cuda:0")
    clock = CudaClock(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    assert clock.flush_bytes() >= max(256 << 20, 2 * l2)
    x = torch.randn(l2 // 8, device=device)  # half of L2: stays resident without a flush

    def median(flush: bool) -> float:
        if not flush:
            clock.flush = lambda: None
        times = [clock.time(lambda: x.sum())[0] for _ in range(50)]
        return statistics.median(times)

    cold = median(True)
    hot = median(False)
    assert cold > hot, (cold, hot)


def test_honest_candidate_on_cuda_passes_and_unwritten_output_reads_poison(kit):
    ok = kit.run("correct", SCALE, "import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                 "    def forward(self, x):\n        return x + x\n", backend="cuda")
    assert ok.status == Status.ok, ok.message
    stale = kit.run("correct", SCALE, "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n"
                    "    def forward(self, x):\n        return torch.empty_like(x)\n", backend="cuda")
    assert stale.status == Status.mismatch, stale.message


def test_side_stream_work_is_inside_the_timed_window(kit):
    side = kit.run("time", CHAIN, SIDE_STREAM, backend="cuda", timing_trials=30)
    same = kit.run("time", CHAIN, SAME_STREAM, backend="cuda", timing_trials=30)
    assert side.status == same.status == Status.ok, (side.message, same.message)
    assert side.timing.median_ms > 0.7 * same.timing.median_ms


def test_cuda_and_triton_kernels_count_as_the_candidates_own(kit, relu, cache_dir):
    from candidates import cuda_candidate, triton_candidate

    from feedback.compile import compile_candidate, locate

    options = EvalOptions(size="small", cache_dir=cache_dir)
    for backend, code, kernel in (("cuda", cuda_candidate(), "relu_kernel"),
                                  ("triton", triton_candidate(), "relu_kernel")):
        built = compile_candidate(relu, code, backend, options)
        assert built.status == Status.ok, built.message
        paths = locate(code, backend, options)
        common = dict(candidate_path=paths.candidate, extensions_dir=paths.extensions_dir,
                      backend=backend, size="small", cache_dir=cache_dir)
        assert kit.run("correct", relu, None, **common).status == Status.ok
        profile = kit.run("profile", relu, None, **common).profile
        own = [r for r in profile.rows if r.own]
        assert profile.device == "cuda" and own and kernel in own[0].name, profile.rows
        assert profile.own_share > 0.3


def test_illegal_memory_access_is_a_runtime_error_in_its_own_process(kit, relu, cache_dir):
    from candidates import cuda_candidate

    from feedback.compile import compile_candidate, locate

    code = cuda_candidate("wild")
    options = EvalOptions(size="small", cache_dir=cache_dir)
    assert compile_candidate(relu, code, "cuda", options).status == Status.ok
    paths = locate(code, "cuda", options)
    exit_code, report = kit.run_child("correct", relu, None, candidate_path=paths.candidate,
                                      extensions_dir=paths.extensions_dir, backend="cuda",
                                      size="small", cache_dir=str(cache_dir))
    assert exit_code == 0 and report.status == Status.runtime_error
    assert "illegal memory access" in report.message or "CUDA error" in report.message
