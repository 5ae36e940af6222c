"""The two clocks: CUDA events for cuda/triton, host wall-clock for cpp. Both flush caches first.

Captured at import (before any candidate exists): `time.perf_counter`, `torch.cuda.Event`,
`torch.cuda.synchronize`. A candidate that rebinds them later changes nothing here, and the
tamper snapshot reports it anyway.

GPU protocol per timed sample (issue 3, "timing"; issue 4, class 5; issue 12, item 5): reset
persisting L2 lines and the persisting limit (persist.py), zero a buffer larger than L2
(max(256 MB, 2 x L2)), record an event, synchronize the device, record another (`wake_ms`, the
host's wake-up from a device-wide synchronize, measured on trusted work only), record the start
event (`flush_ahead`: the flush after that synchronize instead, and the start event behind it at
once; `lead`, trusted programs only: the start event behind a trusted spin, see `lead_ms`), run
the sample's calls back to back, record an event on the calls' stream, synchronize the *device*
(every stream, so work a candidate hides on a side stream is inside the window), record the end
event (`tail_ms`: how long after the calls' stream was done); then check that no call set
a persisting limit again. The window is start to end less the host's wake-up
(`sampling.window_ms`): it never ends before the calls' own stream did, and work left on other
streams counts but for at most that allowance per window. For a window shorter than half the
target sample length the allowance is at least the host's wake-up after a trusted wait as long as
the window (`waited_wake`, `wake_floor_ms`; `EvalOptions.wake_after_wait`): the tail after a wait
of milliseconds exceeded the wake-up after the flush's ~0.1 ms, by an amount that moved with the
host's load (H200 run 35: the 1.7 ms relu's spread 1.48% before, 1.02% with it). (H200, runs 18-25: the tail, the
same host path, was 0.04 ms in one evaluation and 0.11-0.12 ms in the next; at the 5 calls a
window of a 1.7 ms relu that alone moved its median by ~1%.)
CPU protocol: write a 32 MB buffer (about a last-level cache), then `perf_counter()` around the
calls. A sample of several calls (sampling.py) reports the time per call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import torch

from feedback.worker import persist, sampling

_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_sleep = torch.cuda._sleep
_reset_persisting = persist.reset
_check_persisting = persist.check
GPU_FLUSH_MIN = 256 << 20
CPU_FLUSH = 32 << 20
LEAD_MS = (0.05, 1.0)
"""The least and most trusted lead a window may start behind (`CudaClock.lead_ms`)."""
LEAD_FIRST_MS = 0.2
"""The lead of a clock's first window, before it has seen the host's time a call."""


class Clock:
    """Times one call of `fn` after flushing caches; returns (milliseconds, output)."""

    name = "host_wall"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.launch_ms: float | None = None  # GPU: the last window's host time per call (launches)
        self.tail_ms: float | None = None  # GPU: the last window's end (see CudaClock.interval)
        self.wake_ms: float | None = None  # GPU: the last window's wake-up allowance (the same)
        self.flush_buffer = torch.empty(self.flush_bytes(), dtype=torch.uint8, device=device)

    def flush_bytes(self) -> int:
        return CPU_FLUSH

    def flush(self) -> None:
        self.flush_buffer.zero_()

    def settle(self, ms: float) -> None:
        """Nothing to do on the CPU (its clocks are not the evaluator's to steer)."""

    def sm_clock_mhz(self) -> int | None:
        return None

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        """One call in its own window: (ms, output)."""
        ms, outs = self.interval([fn])
        return ms, outs[0]

    def interval(self, calls: Sequence[Callable[[], Any]]) -> tuple[float, list[Any]]:
        """The calls back to back in one window after one flush: (ms per call, outputs)."""
        self.flush()
        start = perf_counter()
        outs = [fn() for fn in calls]
        return (perf_counter() - start) * 1e3 / len(calls), outs


class CudaClock(Clock):
    name = "cuda_events"

    def __init__(self, device: torch.device, flush_ahead: bool = False, lead: bool = False) -> None:
        super().__init__(device)
        self.flush_ahead = flush_ahead
        self.lead = lead  # EvalOptions.trusted_lead, for a trusted program's clock only
        self.lead_spun_ms: float | None = None  # the last window's lead as the device spun it
        self._call_ms: float | None = None  # the last window's time a call
        self.wake_floor_ms: float | None = None  # `waited_wake`'s figure, when the job measures it
        self._cycles_per_ms = 1.5e6  # torch.cuda._sleep's spin, corrected by each measured wait

    def flush_bytes(self) -> int:
        l2 = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0)
        return max(GPU_FLUSH_MIN, 2 * l2)

    def settle(self, ms: float) -> None:
        """Keep the device busy with trusted work (cache flushes) for `ms` milliseconds: an idle
        GPU runs at lower clocks and takes a while to ramp up, which made one process's medians
        differ from the next one's (docs/gpu-validation.md)."""
        end = perf_counter() + ms / 1e3
        while perf_counter() < end:
            for _ in range(8):
                self.flush()
            _synchronize(self.device)

    def sm_clock_mhz(self) -> int | None:
        """The SM clock now (NVML through torch), or None when NVML is unavailable."""
        try:
            return int(torch.cuda.clock_rate(self.device))
        except Exception:  # noqa: BLE001 - pynvml missing or unsupported: a diagnostic only
            return None

    def interval(self, calls: Sequence[Callable[[], Any]]) -> tuple[float, list[Any]]:
        mark, woke, start, stream_end, end = (_Event(enable_timing=True) for _ in range(5))
        _reset_persisting()
        if not self.flush_ahead:
            self.flush()
        # the same host path as the window's end, on trusted work only: the wake-up allowance
        mark.record()
        _synchronize(self.device)
        woke.record()
        if self.flush_ahead:  # EvalOptions.flush_ahead: the flush covers the first launch
            self.flush()
        lead_cycles = int(self.lead_ms(len(calls)) * self._cycles_per_ms)
        if lead_cycles:
            led = _Event(enable_timing=True)
            led.record()
            _sleep(lead_cycles)
        start.record()
        launch = perf_counter()
        outs = [fn() for fn in calls]
        self.launch_ms = (perf_counter() - launch) * 1e3 / len(calls)
        stream_end.record()
        _synchronize(self.device)
        end.record()
        end.synchronize()
        _check_persisting()
        # from the end of the calls' work on this stream to the end event: the host's wake-up
        # from the device-wide synchronize, plus any work still running on other streams
        self.tail_ms = stream_end.elapsed_time(end)
        self.wake_ms = max(mark.elapsed_time(woke), self.wake_floor_ms or 0.0)
        if lead_cycles:  # the spin's length calibrates the next one's, as a waited wake-up does
            self.lead_spun_ms = led.elapsed_time(start)
            if self.lead_spun_ms > 0:
                self._cycles_per_ms = lead_cycles / self.lead_spun_ms
        self._call_ms = sampling.window_ms(start.elapsed_time(end), self.tail_ms, self.wake_ms) \
            / len(calls)
        return self._call_ms, outs

    def lead_ms(self, calls: int) -> float:
        """How long a trusted window's start event waits behind a spin on the device (0: none).
        At the start event of an idle device the host has yet to launch the first call, and the
        device waits for it inside the window: 0.10-0.21 ms a call for a torch.compile program in
        the short windows of gigabyte inputs on an H100 (run 101, `launch_ms`), moving with the
        builds' load, against 0.05-0.06 ms for eager programs and candidates. A spin of twice the
        host's time a call lets the host launch the first call before the window starts. Not for
        several calls of a host-bound program (sampling.host_bound): the host would launch calls
        ahead, and the window would hold fewer calls' launches than it times. Only a trusted
        program's clock leads: a candidate's work on another stream could run during the spin."""
        if not self.lead:
            return 0.0
        if self.launch_ms is None or self._call_ms is None:
            return LEAD_FIRST_MS
        if calls > 1 and sampling.host_bound(self.launch_ms, self._call_ms):
            return 0.0
        return min(max(2 * self.launch_ms, LEAD_MS[0]), LEAD_MS[1])


    def waited_wake(self, wait_ms: float) -> float:
        """The host's wake-up from the device-wide synchronize after a trusted wait of about
        `wait_ms` (a spinning kernel), through the window's own end path: the end event after the
        synchronize, less the wait's own end on the stream. A window's tail after a wait of a few
        milliseconds was longer than the wake-up after the ~0.1 ms flush (H200: 0.04-0.15 ms
        against 0.03-0.09 ms, moving with the host's load), and its excess stayed in the window."""
        start, waited, end = (_Event(enable_timing=True) for _ in range(3))
        _synchronize(self.device)
        cycles = max(int(wait_ms * self._cycles_per_ms), 1000)
        start.record()
        _sleep(cycles)
        waited.record()
        _synchronize(self.device)
        end.record()
        end.synchronize()
        spun = start.elapsed_time(waited)
        if spun > 0:
            self._cycles_per_ms = cycles / spun
        return waited.elapsed_time(end)


def clock_for(device: torch.device, flush_ahead: bool = False, lead: bool = False) -> Clock:
    return CudaClock(device, flush_ahead, lead) if device.type == "cuda" else Clock(device)

