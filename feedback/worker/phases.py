"""Where a job's seconds went, by phase (`WorkerReport.phases`, read by `make gpu-check`'s job log).

One table per process, cleared when a job starts (`clear`): a worker that runs several jobs (the
in-process test kit, a standby worker) reports each job's own phases, never the sum of all before.
A name with a slash (`prepare/reference`) is a part of the phase before the slash: it is inside
that phase's seconds, not beside them (`top_level`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from time import perf_counter

SECONDS: dict[str, float] = {}


def clear() -> None:
    SECONDS.clear()


@contextlib.contextmanager
def timed(name: str) -> Iterator[None]:
    """Add the block's wall time to phase `name` (also when it raises)."""
    start = perf_counter()
    try:
        yield
    finally:
        SECONDS[name] = SECONDS.get(name, 0.0) + perf_counter() - start


def top_level(seconds: dict[str, float]) -> float:
    """The seconds of the phases that are not parts of another (no slash in the name)."""
    return sum(v for k, v in seconds.items() if "/" not in k)
