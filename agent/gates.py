"""Admission to the evaluator's stages, so concurrent trajectories never distort each other's
timing, and the scheduler's own account of how busy each gate kept its resource.

Compiles run in parallel, at most one per host CPU (the `compile` gate). Correctness and timing
pass the `device` gate: on a GPU backend one job at a time per device, in the order asked (the
evaluator's per-device lock says the same across processes; queueing here keeps the waiting
trajectories off the thread pool). On the cpp backend the device *is* the host, so compiles
would steal the cores being timed: there a timing run waits until no compile or correctness
check is running, and holds them off while it measures. With the Ray executor the stages run on
the cluster: the gates then admit as many compiles as the cluster has free CPUs and as many
correctness/timing jobs as the stage workers have lanes (`RayEvaluator.admission`), and Ray
places them.

Admitted stages run on the gates' own worker threads (`EvalGates.run`), one per slot, never on
asyncio's default pool: there the run's store reads and writes and the LLM client's work would
queue behind compiles, and a device job holding the GPU gate would wait for a thread while the
GPU idles.

Each gate meters itself: busy seconds (the union of its holds, so two overlapping compiles count
once), the sum of its holds, the number of stage calls and the time they waited to enter.
`EvalGates.stats()` reports them; busy seconds over the wall time since the gates were made is
the share of the run the GPU (or the compile pool) was working.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeVar

Stage = Literal["compile", "correct", "perform"]
Gate = Literal["compile", "device"]
GATE_OF: dict[Stage, Gate] = {"compile": "compile", "correct": "device", "perform": "device"}
T = TypeVar("T")


class SharedExclusive:
    """A readers-writer gate: up to `slots` shared holders, or one exclusive holder.

    A waiting exclusive holder blocks new shared entries, so timing is never starved by compiles.
    """

    def __init__(self, slots: int):
        self._slots = slots
        self._shared = 0
        self._exclusive = False
        self._waiting_exclusive = 0
        self._cond = asyncio.Condition()

    @asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self._cond:
            await self._cond.wait_for(lambda: not self._exclusive and not self._waiting_exclusive
                                      and self._shared < self._slots)
            self._shared += 1
        try:
            yield
        finally:
            async with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        async with self._cond:
            self._waiting_exclusive += 1
            try:
                await self._cond.wait_for(lambda: not self._exclusive and self._shared == 0)
            finally:
                self._waiting_exclusive -= 1
            self._exclusive = True
        try:
            yield
        finally:
            async with self._cond:
                self._exclusive = False
                self._cond.notify_all()


@dataclass(frozen=True)
class GateStats:
    """One gate's account over a run so far."""

    calls: int
    """Stage calls that entered the gate."""
    busy_s: float
    """Seconds at least one call held the gate (the union of the holds)."""
    held_s: float
    """Sum of the holds (equals busy_s when holds never overlap)."""
    wait_s: float
    """Sum of the seconds calls waited to enter."""
    max_wait_s: float
    """Longest single wait."""
    wall_s: float
    """Seconds since the gates were made."""

    @property
    def busy_share(self) -> float | None:
        """busy_s / wall_s: the share of the run the gate's resource was working (None at 0 s)."""
        return self.busy_s / self.wall_s if self.wall_s > 0 else None

    def as_dict(self) -> dict[str, float | int | None]:
        return {**asdict(self), "busy_share": self.busy_share}


class Meter:
    """Busy time as the union of hold intervals, computed online from enter/leave times."""

    def __init__(self) -> None:
        self.calls = 0
        self.wait_s = 0.0
        self.max_wait_s = 0.0
        self.held_s = 0.0
        self._busy_s = 0.0
        self._holders = 0
        self._busy_since = 0.0

    def enter(self, requested: float, acquired: float) -> None:
        self.calls += 1
        self.wait_s += acquired - requested
        self.max_wait_s = max(self.max_wait_s, acquired - requested)
        if self._holders == 0:
            self._busy_since = acquired
        self._holders += 1

    def leave(self, acquired: float, released: float) -> None:
        self.held_s += released - acquired
        self._holders -= 1
        if self._holders == 0:
            self._busy_s += released - self._busy_since

    def busy_s(self, now: float) -> float:
        """Busy seconds up to `now` (a hold still open counts up to `now`)."""
        return self._busy_s + (now - self._busy_since if self._holders else 0.0)


@dataclass(frozen=True)
class GateCall:
    """One stage call through a gate (kept only when the gates trace)."""

    stage: Stage
    key: Hashable
    """What the caller named the call (the graph passes (problem, index, turn))."""
    requested: float
    acquired: float
    released: float


class EvalGates:
    """Which gate each evaluator stage passes through, for one backend, and their accounting.

    Args:
        backend: the run's backend (`cpp` shares the host between compiles and the device).
        cpu_slots: concurrent compiles (None = the host's CPU count).
        device_slots: concurrent correctness/timing jobs (1 per GPU of this host; a Ray
            executor's pool of stage workers has one slot per lane of each worker).
        remote: the stages run on other machines (a Ray cluster): on cpp, timing then no longer
            shares this host's cores with compiles, so it passes the device gate like a GPU.
        trace: keep every call's times in `calls` (benchmarks; memory grows with the run).
        clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, backend: str, cpu_slots: int | None = None, *, device_slots: int = 1,
                 remote: bool = False, trace: bool = False,
                 clock: Callable[[], float] = time.monotonic):
        self.backend = backend
        self.cpu_slots = cpu_slots or os.cpu_count() or 1
        self._cpu = SharedExclusive(self.cpu_slots)
        self._device = asyncio.Semaphore(device_slots)
        self._remote = remote
        self._clock = clock
        self._opened = clock()
        self._meters: dict[Gate, Meter] = {"compile": Meter(), "device": Meter()}
        self.calls: list[GateCall] | None = [] if trace else None
        # at most cpu_slots shared holders plus device_slots device (or one exclusive) holders
        self._threads = ThreadPoolExecutor(self.cpu_slots + device_slots,
                                           thread_name_prefix="eval-stage")

    async def run(self, stage: Stage, key: Hashable, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` behind `stage`'s gate, on a worker thread of the gates' own (which an
        admitted stage never waits for), in the caller's context (its log bindings)."""
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        async with self.stage(stage, key):
            return await asyncio.get_running_loop().run_in_executor(self._threads, call)

    def close(self) -> None:
        """Let the worker threads go (idle ones exit at once)."""
        self._threads.shutdown(wait=False)

    def stage(self, stage: Stage, key: Hashable = None) -> AbstractAsyncContextManager:
        """The async context manager to hold while running `stage` (`key` names it in traces)."""
        return self._metered(stage, key, self._admission(stage))

    def _admission(self, stage: Stage) -> AbstractAsyncContextManager:
        if stage == "compile":
            return self._cpu.shared()
        if self.backend != "cpp" or self._remote:
            return self._device
        return self._cpu.exclusive() if stage == "perform" else self._cpu.shared()

    @asynccontextmanager
    async def _metered(self, stage: Stage, key: Hashable,
                       admission: AbstractAsyncContextManager) -> AsyncIterator[None]:
        meter = self._meters[GATE_OF[stage]]
        requested = self._clock()
        async with admission:
            acquired = self._clock()
            meter.enter(requested, acquired)
            try:
                yield
            finally:
                released = self._clock()
                meter.leave(acquired, released)
                if self.calls is not None:
                    self.calls.append(GateCall(stage, key, requested, acquired, released))

    def stats(self) -> dict[Gate, GateStats]:
        """Each gate's account from when the gates were made until now."""
        now = self._clock()
        return {name: GateStats(calls=m.calls, busy_s=m.busy_s(now), held_s=m.held_s,
                                wait_s=m.wait_s, max_wait_s=m.max_wait_s, wall_s=now - self._opened)
                for name, m in self._meters.items()}
