"""The time job moves onto its device's CPU cores (feedback/cores.py says which and why).

Every thread of the worker is moved (`/proc/self/task`), not only the caller: torch's intra-op
pool (the cpp backend's `cpu_threads`) and CUDA's own threads exist by then, and an affinity set
applies per thread. Done by trusted code after the candidate's import and before the first timed
call; threads started later inherit it. A core refused by the kernel (a cpuset that changed) leaves
that thread where it was: pinning is a measurement aid, not a guard.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


def pin(cores: Sequence[int] | None) -> list[int] | None:
    """Move every thread of this process onto `cores`; the cores now used, None when not pinned."""
    if not cores:
        return None
    wanted = set(cores)
    moved = False
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), wanted)
            moved = True
        except (OSError, ValueError):
            continue
    return sorted(wanted) if moved else None
