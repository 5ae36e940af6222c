"""Helpers the hardening tests import (never `from conftest import ...`: with several test folders
on the path, `conftest` names whichever folder's was imported first)."""

from __future__ import annotations

from pathlib import Path

from problems.record import Problem
from problems.spec import select

BATCHES = {
    "correct": {"time": False},
    "timed": {"time": True, "baselines": False, "timing_trials": 20, "warmup": 2},
    "strict": {"time": False, "library_ops": "strict"},
    "alone": {"time": True, "baselines": False, "timing_trials": 20, "warmup": 2},
    "timed_exact": {"time": True, "baselines": False, "timing_trials": 20, "warmup": 2,
                    "interval_ms": 0, "timing_max_trials": 20, "warmup_s": 0},
    "compiled": {"time": True, "baselines": False, "timing_trials": 20, "warmup": 2, "run_timeout_s": 300},
}
"""Options per batch of the corpus (cases.Case.batch), over `base_options`. `alone` is timed
like `timed` but runs by itself: the CPU-cores check needs the machine's cores free.
`timed_exact` fixes which calls are timed (2 warm-up calls, then exactly 20 samples of one call,
no settling warm-up), for a case that counts calls: with the defaults a short kernel's calls
13-26 are warm-up calls (several calls per sample, samples until stable), whose outputs nothing
times, so being wrong there gains a candidate nothing. `compiled`: candidates that call
torch.compile, whose jobs compile with Inductor on the CPU (each input shape the trials draw is a
compile of several seconds: 30-60 s a job on the 2-core machine with a test run beside it)."""


def problem_of(spec: object) -> Problem:
    """A `Problem` from a suite spec, or the record itself."""
    return spec if isinstance(spec, Problem) else select(str(spec)).problems[0]


def leaked_workers() -> list[int]:
    """Processes whose HOME is a worker scratch directory that no longer exists (a job that
    ended left them behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        homes = [e[5:].decode() for e in env if e.startswith(b"HOME=")]
        if homes and Path(homes[0]).name.startswith("kr-") and not Path(homes[0]).exists():
            found.append(int(entry.name))
    return found
