"""CPU time of threads the candidate started, measured per thread (issue 12, item 3).

On the cpp backend the host clock is fair only if the candidate computes on the threads the
evaluation gives it (the caller and torch's pool of `cpu_threads`): work on threads of its own
(std::thread, an OpenMP team) makes its wall time flatter than the reference's. The first
measure, process CPU time minus the calling thread's, charged the candidate with every other
thread of the process (torch's pool, a library's idle or spinning pool, the sandbox's own) and
refused an honest single-threaded `-O3` loop on a 2-core machine.

So now only threads that did not exist when the candidate was imported count (`baseline`: the
task ids of `/proc/self/task` then, taken by `guards.ThreadCount`). Their CPU time during a call is
`Δ process CPU time − Σ Δ CPU time of each baseline thread` (Linux's per-thread CPU clocks), which
includes threads that started and finished inside the call. The reads are ordered so that what
moves between them (baseline threads' time while the clocks are read, the caller's own reading)
can only lower the figure: noise never charges an honest kernel (measured: a few µs per call with
a baseline thread spinning on the other core). A call during which a baseline thread exited is
not measured (its last slice of CPU time cannot be told from a new thread's). A thread the
candidate leaves running after a call is `ThreadCount`'s finding, not this module's.
"""

from __future__ import annotations

import os
import time

_PROCESS = time.CLOCK_PROCESS_CPUTIME_ID


def task_ids() -> set[int]:
    """The ids of this process's threads now."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _thread_clock(tid: int) -> int:
    """Linux's CPU-time clock id of thread `tid` (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED))."""
    return ((~tid) << 3) | 6


def _thread_ns(tid: int) -> int | None:
    try:
        return time.clock_gettime_ns(_thread_clock(tid))
    except OSError:  # the thread has exited
        return None


class NewThreadTime:
    """`start()` / `stop()` around one call: CPU seconds of threads outside `baseline`."""

    def __init__(self, baseline: set[int]) -> None:
        self.baseline = sorted(baseline)
        self._threads: list[int | None] = []
        self._process = 0

    def start(self) -> None:
        self._threads = [_thread_ns(t) for t in self.baseline]  # threads first, then the process
        self._process = time.clock_gettime_ns(_PROCESS)

    def stop(self) -> float | None:
        """Seconds since `start()`, or None when a baseline thread exited meanwhile."""
        process = time.clock_gettime_ns(_PROCESS)  # the process first, then the threads
        threads = [_thread_ns(t) for t in self.baseline]
        baseline = 0
        for before, after in zip(self._threads, threads):
            if before is None:
                continue  # already gone at start: its time is in neither reading
            if after is None:
                return None
            baseline += after - before
        return max(0, process - self._process - baseline) / 1e9
