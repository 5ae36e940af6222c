"""Admission to the evaluator's stages, so concurrent trajectories never distort each other's
timing.

Compiles run in parallel, at most one per host CPU. The evaluator itself serialises device jobs
(its per-device lock), which is all a GPU backend needs. On the cpp backend the device *is* the
host, so compiles would steal the cores being timed: there a timing run waits until no compile
or correctness check is running, and holds them off while it measures.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Literal

Stage = Literal["compile", "correct", "perform"]


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


class EvalGates:
    """Which gate each evaluator stage passes through, for one backend."""

    def __init__(self, backend: str, cpu_slots: int | None = None):
        self.backend = backend
        self._cpu = SharedExclusive(cpu_slots or os.cpu_count() or 1)

    def stage(self, stage: Stage) -> AbstractAsyncContextManager:
        """The async context manager to hold while running `stage`."""
        if stage == "compile":
            return self._cpu.shared()
        if self.backend != "cpp":
            return nullcontext()
        return self._cpu.exclusive() if stage == "perform" else self._cpu.shared()
