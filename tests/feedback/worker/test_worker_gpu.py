"""The worker on a CUDA GPU (opt-in: `pytest -m gpu`): events, L2 flush, poison, side streams,
own-kernel attribution for CUDA and Triton candidates, and a fatal kernel in a child process."""

from __future__ import annotations

import statistics

import pytest
import torch

from feedback.options import EvalOptions
from feedback.result import Status

# timing: its jobs run in-process, outside the evaluator's device lock, and several measure time
pytestmark = [pytest.mark.gpu, pytest.mark.timing,
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
    assert t.clock == "cuda_events" and 100 <= t.n <= 400  # grown until the median is sure
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms < 50
    assert t.launch_ms is not None and 0 < t.launch_ms < 50  # the host's share, per call
    assert t.tail_ms is not None and 0 <= t.tail_ms < 50  # the device-wide synchronize's wake-up
    assert t.wake_ms is not None and 0 <= t.wake_ms < 50  # the same, on trusted work
    assert report.noise is not None and report.noise < 0.5
    assert report.environment.device.startswith("NVIDIA")


def test_a_baselines_job_times_eager_and_torch_compile_with_cuda_events(kit):
    """One process, one hold of the device: both parts timed as their own jobs would be (an
    elementwise op: torch.compile's one kernel against eager's one, within a factor of 2).

    In a process of its own, as a worker runs it: torch.compile leaves inductor's compile pool
    in its process, whose timer thread starts whenever a pool result arrives, and an in-process
    candidate job after it would count that thread as the candidate's (H200, 2026-12-05:
    test_side_stream_work_is_inside_the_timed_window failed so, after this test)."""
    code, report = kit.run_child("time", SCALE, None, role="baselines", backend="cuda",
                                 timing_trials=30, warmup=5)
    assert code == 0 and report is not None, kit.last_stderr[-3000:]
    assert report.status == Status.ok, report.message
    eager, compiled = report.parts
    for part in report.parts:
        t = part.timing
        assert part.status == Status.ok and t.clock == "cuda_events" and t.n >= 30
        assert 0 < t.min_ms <= t.median_ms <= t.max_ms < 50
    assert eager.min_bytes == 2 * 4 * (1 << 24) and compiled.min_bytes is None
    assert 0.5 < compiled.timing.median_ms / eager.timing.median_ms < 2


@pytest.mark.parametrize("flush_ahead", [False, True])
def test_l2_flush_sends_reads_to_memory(flush_ahead):
    """The clock's flush evicts what the last call read: a read of half of L2 right after the
    flush comes from memory, and right after a GPU wait of about the flush's length that touches
    no memory it comes from L2. The read is timed between two events around it alone, queued
    behind the flush (or the wait), so no host time enters: timed through `clock.time`, each
    window carries ~0.085 ms of host time, which swamped the read's few microseconds (H200,
    2026-12-02: 0.089 ms cold, 0.093 ms hot). Then the clock itself (`flush_ahead` too): its
    window holds the cold read. Not more than it: the window leaves out the host's wake-up, so
    it can come out a hair under the event-timed read (H200 run 40: 0.01867 ms against 0.01885
    ms cold); it must be nearer the cold read than the hot one."""
    from feedback.worker.clocks import CudaClock

    device = torch.device("cuda:0")
    clock = CudaClock(device, flush_ahead)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    assert clock.flush_bytes() >= max(256 << 20, 2 * l2)
    x = torch.randn(l2 // 8, device=device)  # half of L2: stays resident without a flush

    def read_ms(flush: bool) -> float:
        before, after = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        x.sum()  # x in L2
        clock.flush() if flush else torch.cuda._sleep(200_000)  # ~0.1 ms, about one flush
        before.record()
        x.sum()
        after.record()
        after.synchronize()
        return before.elapsed_time(after)

    cold = statistics.median(read_ms(True) for _ in range(50))
    hot = statistics.median(read_ms(False) for _ in range(50))
    assert cold > hot, (cold, hot)
    window = statistics.median(clock.time(lambda: x.sum())[0] for _ in range(20))
    assert window > (cold + hot) / 2, (window, cold, hot)  # nearer the cold read than the hot


def test_a_waited_wake_up_is_the_end_paths_host_time_after_a_wait_of_about_the_asked_length():
    from feedback.worker.clocks import CudaClock

    clock = CudaClock(torch.device("cuda:0"))
    wakes = [clock.waited_wake(8.0) for _ in range(6)]  # the first calibrates the spin's cycles
    assert all(0 <= w < 5 for w in wakes), wakes
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    clock.waited_wake(8.0)
    end.record()
    end.synchronize()
    assert 4.0 < start.elapsed_time(end) < 16.0  # the wait is about as long as asked
    clock.wake_floor_ms = 0.2
    clock.time(lambda: torch.zeros(4, device="cuda:0"))
    assert clock.wake_ms >= 0.2  # the window's allowance is at least the waited wake-up


def test_a_trusted_lead_keeps_the_hosts_first_launch_out_of_the_window():
    """A call that spends 0.3 ms on the host before it launches a short kernel: without a lead
    the device waits for it inside the window; a trusted clock's lead (twice the host's time a
    call, learned from the window before) lets the host launch it before the start event."""
    from time import perf_counter

    from feedback.worker.clocks import CudaClock

    x = torch.randn(1 << 20, device="cuda:0")

    def call():
        end = perf_counter() + 0.3e-3
        while perf_counter() < end:
            pass
        return x.sum()

    plain, led = CudaClock(x.device), CudaClock(x.device, lead=True)
    for clock in (plain, led):
        clock.time(call)  # the first window: the lead learns the host's time a call
    without = statistics.median(plain.time(call)[0] for _ in range(20))
    within = statistics.median(led.time(call)[0] for _ in range(20))
    assert without > 0.25 and within < 0.15, (without, within)
    assert 0.55 < led.lead_spun_ms < 1.2, led.lead_spun_ms  # about twice the 0.3 ms, as spun


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
    for backend, code, kernel in (("cuda", cuda_candidate(), "map_kernel"),
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
    assert exit_code == 0 and report.status == Status.runtime_error, kit.last_stderr[-3000:]
    assert "illegal memory access" in report.message or "CUDA error" in report.message


# A ReLU whose launch marks its input persisting in L2 (issue 12, item 5): with a persisting
# set-aside, the input survives the cache flush and the next timed call reads it from L2.
PERSIST_KERNELS = r'''
#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>

__global__ void persist_relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

void launch_persist_relu(const float* x, float* y, int64_t n) {
    static cudaDeviceProp prop;
    static bool ready = false;
    if (!ready) {
        int device = 0;
        cudaGetDevice(&device);
        cudaGetDeviceProperties(&prop, device);
        ready = true;
    }
    cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, prop.persistingL2CacheMaxSize);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeAccessPolicyWindow;
    attr[0].val.accessPolicyWindow.base_ptr = (void*)x;
    attr[0].val.accessPolicyWindow.num_bytes =
        std::min<size_t>(n * sizeof(float), (size_t)prop.accessPolicyMaxWindowSize);
    attr[0].val.accessPolicyWindow.hitRatio = 1.0f;
    attr[0].val.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    attr[0].val.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3((unsigned)((n + 255) / 256));
    config.blockDim = dim3(256);
    config.stream = 0;
    config.attrs = attr;
    config.numAttrs = 1;
    cudaLaunchKernelEx(&config, persist_relu_kernel, x, y, n);
}
'''
PERSIST_WRAPPERS = r'''
#include <torch/extension.h>
void launch_persist_relu(const float* x, float* y, int64_t n);
torch::Tensor relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_persist_relu(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    return y;
}
'''
PERSIST_CANDIDATE = ("import torch\nimport torch.nn as nn\n"
                     "from torch.utils.cpp_extension import load_inline\n"
                     f"KERNELS = r'''{PERSIST_KERNELS}'''\nWRAPPERS = r'''{PERSIST_WRAPPERS}'''\n"
                     "ops = load_inline(name='kr_test_persist', cpp_sources=WRAPPERS, "
                     "cuda_sources=KERNELS, functions=['relu'], no_implicit_headers=True)\n\n\n"
                     "class ModelNew(nn.Module):\n"
                     "    def forward(self, x):\n"
                     "        return ops.relu(x)\n")
GPU_FIXTURES = [("suite:level1/19", PERSIST_CANDIDATE, "cuda")]  # built first by `make gpu-check`


def test_a_kernel_that_makes_its_inputs_persist_in_l2_is_refused(kit, relu, cache_dir):
    from feedback.compile import compile_candidate, locate

    options = EvalOptions(size="small", cache_dir=cache_dir)
    built = compile_candidate(relu, PERSIST_CANDIDATE, "cuda", options)
    assert built.status == Status.ok, built.message
    paths = locate(PERSIST_CANDIDATE, "cuda", options)
    common = dict(candidate_path=paths.candidate, extensions_dir=paths.extensions_dir,
                  backend="cuda", size="small", cache_dir=cache_dir)
    assert kit.run("correct", relu, None, **common).status == Status.ok  # a correct ReLU
    report = kit.run("time", relu, None, timing_trials=20, **common)
    assert report.status == Status.guard_violation, (report.status, report.message, report.timing)
    assert "persisting L2" in report.message


def test_persisting_l2_lines_and_limit_are_reset_before_each_timed_sample():
    import ctypes

    from feedback.worker import persist
    from feedback.worker.clocks import CudaClock

    device = torch.device("cuda:0")
    torch.zeros(1, device=device)  # torch's primary context is current on this thread
    clock = CudaClock(device)
    assert persist.reset() and persist.persisting_limit() == 0

    def set_limit() -> None:
        persist._SET_LIMIT(ctypes.c_int(persist.CU_LIMIT_PERSISTING_L2_CACHE_SIZE),
                           ctypes.c_size_t(4 << 20))

    set_limit()
    assert persist.persisting_limit() > 0  # the driver took it
    ms, _ = clock.time(lambda: torch.ones(16, device=device))  # reset first, then timed
    assert persist.persisting_limit() == 0 and ms > 0
    with pytest.raises(persist.PersistenceViolation, match="persisting L2"):
        clock.time(set_limit)  # set again during a timed call: refused after the window
    assert persist.reset() and persist.persisting_limit() == 0


def test_a_prepared_job_gives_its_freed_device_memory_back_before_it_waits():
    """handoff.exclusive: while a prepared time job waits for its timed part, the blocks its
    set-up freed are the device's again, not held in this process's allocator cache (on the
    H100 the jobs beside such waiting jobs ran out of memory)."""
    import os

    from feedback.job import PREPARED
    from feedback.worker import handoff

    block = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")
    del block
    before = torch.cuda.memory_reserved()
    signal_r, signal_w = os.pipe()
    go_r, go_w = os.pipe()
    os.write(go_w, b"1")  # the parent's go, already given
    handoff._PIPES.append((signal_w, go_r))
    handoff.exclusive()
    assert os.read(signal_r, 16) == PREPARED
    os.close(signal_r)
    os.close(go_w)
    assert before - torch.cuda.memory_reserved() >= 512 << 20, (before, torch.cuda.memory_reserved())
