"""Which CPU cores a device's timing worker owns, and which the rest of the evaluation gets.

Why: a timing is a property of the kernel, not of the host's load (docs/benchmarks.md, P3). On the
H200 an honest ~0.2 ms kernel varied 18.7% between evaluations while the build pool compiled other
candidates, and on the cpp backend the host clock itself shares the machine with the builds. So
each device gets cores of its own at the top of this process's affinity set: GPU `i` the core
`avail[-1 - i]`, the cpp backend's CPU "device" the top `cpu_threads` cores. Every other child of
the evaluator (builds, correctness and profile jobs, standby workers while they wait) is started
on the remaining cores; builds also at a lower priority (`BUILD_NICE`). A time job's worker moves
itself onto its device's cores just before its timed loop (feedback/worker/pinning.py), so its
imports and the torch.compile of a baseline still use the shared cores.

Limits: other programs on the machine are not the evaluator's to move; they can still run on the
device's cores (the lower priority of builds does not apply to them). With too few cores to leave
one for everything else, nothing is pinned (`plan` returns None).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

BUILD_NICE = 10
"""Nice value added to build children (and the compilers they start)."""


@dataclass(frozen=True)
class CorePlan:
    """Cores of one device's timing worker, and those every other child runs on."""

    device: tuple[int, ...]
    others: tuple[int, ...]


def available() -> list[int]:
    """The cores this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


@functools.cache
def gpu_count() -> int:
    """GPUs visible here (nvidia-smi, no CUDA context in the parent); at least 1."""
    from feedback.environment import _probe_lines

    return max(1, len([ln for ln in _probe_lines(["nvidia-smi", "-L"]) if ln.startswith("GPU ")]))


def plan(gpu_index: int | None, cpu_threads: int = 1, avail: list[int] | None = None,
         gpus: int | None = None) -> CorePlan | None:
    """The split of the module docstring for one device job: `gpu_index` None = the cpp backend
    (its timing runs on `cpu_threads` host cores). None when there are too few cores."""
    avail = available() if avail is None else sorted(avail)
    if gpu_index is None:
        reserved, mine = cpu_threads, avail[len(avail) - cpu_threads:]
    else:
        reserved = max(gpus if gpus is not None else gpu_count(), gpu_index + 1)
        mine = avail[len(avail) - 1 - gpu_index:len(avail) - gpu_index] if gpu_index < len(avail) else []
    if len(avail) - reserved < 1 or not mine:
        return None
    return CorePlan(device=tuple(mine), others=tuple(avail[:len(avail) - reserved]))
