"""Where a job's seconds went, by phase (`WorkerReport.phases`, read by `make gpu-check`'s job log).

One table per process, cleared when a job starts (`clear`): a worker that runs several jobs (the
in-process test kit, a standby worker) reports each job's own phases, never the sum of all before.
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
