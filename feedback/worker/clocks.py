"""The two clocks: CUDA events for cuda/triton, host wall-clock for cpp. Both flush caches first.

Captured at import (before any candidate exists): `time.perf_counter`, `torch.cuda.Event`,
`torch.cuda.synchronize`. A candidate that rebinds them later changes nothing here, and the
tamper snapshot reports it anyway.

GPU protocol per timed sample (issue 3, "timing"; issue 4, class 5; issue 12, item 5; issue 15):
reset persisting L2 lines and the persisting limit (persist.py), zero a buffer larger than L2
(max(256 MB, 2 x L2)); synchronize, queue the flush and record the start event behind it at once
(`flush_ahead`, the default: the host launches the first call while the flush runs, so that
launch is outside the window; off: flush, synchronize, then record the start event); run the
sample's calls back to back; record an event on the calls' stream (`stream_end`), wait for it by
polling (a blocking wait as long as a window let the host thread sleep: on the H200 with builds
alongside, its wake-up made the tails of a candidate's windows 0.04-0.12 ms against a few
hundredths for short waits), synchronize the *device* (every stream), record the end event. The window ends at `stream_end` when the end event
came no later than `trusted_tail_ms` after it (`end_on_stream`, the default): nothing but the
host's wake-up from the synchronize ran after the calls' stream was done. Otherwise (work left on
another stream, or the host late) it ends at the end event, so work a candidate hides on a side
stream is inside the window; at most `trusted_tail_ms` of such work (~0.1 ms, measured per
process) can pass unseen, against a 10-ms sample. `tail_ms`: the last window's stream_end-to-end
time; `tail_in_window`: whether it was counted. Then check that no call set a persisting limit
again.
CPU protocol: write a 32 MB buffer (about a last-level cache), then `perf_counter()` around the
calls. A sample of several calls (sampling.py) reports the time per call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import torch

from feedback.worker import persist

_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_reset_persisting = persist.reset
_check_persisting = persist.check
GPU_FLUSH_MIN = 256 << 20
CPU_FLUSH = 32 << 20
CALIBRATION = 16
TAIL_TRUST = 3.0
TAIL_FLOOR_MS = 0.02
"""A window ends on its calls' stream when the device-wide end came within TAIL_TRUST x the
median tail of trusted windows (at least TAIL_FLOOR_MS): on the H200 with 8 builds alongside those
tails were 0.03-0.12 ms, varying between evaluations with the host's load (docs/benchmarks.md, P3)."""


class Clock:
    """Times one call of `fn` after flushing caches; returns (milliseconds, output)."""

    name = "host_wall"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.launch_ms: float | None = None  # GPU: the last window's host time per call (launches)
        self.tail_ms: float | None = None  # GPU: the last window's end (see CudaClock.interval)
        self.tail_in_window = True  # GPU: whether that tail was inside the window
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

    def __init__(self, device: torch.device, flush_ahead: bool = True,
                 end_on_stream: bool = True) -> None:
        super().__init__(device)
        self.flush_ahead, self.end_on_stream = flush_ahead, end_on_stream
        self.trusted_tail_ms: float | None = None  # measured at the first window (calibrate)

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

    def calibrate(self) -> float:
        """`trusted_tail_ms`: TAIL_TRUST x the median tail of CALIBRATION windows of trusted
        one-stream work (one more flush, which the host outruns into the synchronize as it does a
        candidate's calls) under this protocol, at least TAIL_FLOOR_MS: how long this process's
        host takes to see the device idle and record the end event, under today's load."""
        tails = []
        for _ in range(CALIBRATION):
            self._window([self.flush])
            tails.append(self.tail_ms)
        tails.sort()
        self.trusted_tail_ms = max(TAIL_FLOOR_MS, TAIL_TRUST * tails[len(tails) // 2])
        return self.trusted_tail_ms

    def interval(self, calls: Sequence[Callable[[], Any]]) -> tuple[float, list[Any]]:
        if self.end_on_stream and self.trusted_tail_ms is None:
            self.calibrate()
        return self._window(calls)

    def _window(self, calls: Sequence[Callable[[], Any]]) -> tuple[float, list[Any]]:
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        stream_end = _Event(enable_timing=True)
        _reset_persisting()
        if self.flush_ahead:  # the flush covers the first launch
            _synchronize(self.device)
            self.flush()
        else:
            self.flush()
            _synchronize(self.device)
        start.record()
        launch = perf_counter()
        outs = [fn() for fn in calls]
        self.launch_ms = (perf_counter() - launch) * 1e3 / len(calls)
        stream_end.record()
        while not stream_end.query():  # spin: a blocking wait as long as a window may sleep, and
            pass                       # its wake-up (up to ~0.1 ms, H200 under load) be the tail
        _synchronize(self.device)  # at once, unless work is left on another stream
        end.record()
        end.synchronize()
        _check_persisting()
        # from the end of the calls' work on this stream to the end event: the host's wake-up
        # from the device-wide synchronize, plus any work still running on other streams
        self.tail_ms = stream_end.elapsed_time(end)
        trusted = self.trusted_tail_ms
        self.tail_in_window = not (self.end_on_stream and trusted is not None
                                   and self.tail_ms <= trusted)
        last = end if self.tail_in_window else stream_end
        return start.elapsed_time(last) / len(calls), outs


def clock_for(device: torch.device, flush_ahead: bool = True, end_on_stream: bool = True) -> Clock:
    return CudaClock(device, flush_ahead, end_on_stream) if device.type == "cuda" else Clock(device)

