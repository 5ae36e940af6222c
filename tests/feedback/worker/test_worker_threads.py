"""Issue 12, item 3: the cpp CPU-time guard counts only threads the candidate started, per thread,
so a busy thread that was there before the candidate never charges an honest kernel."""

from __future__ import annotations

import threading
import time

import torch
from workerkit import MATMUL

from feedback.result import Status
from feedback.worker.cputime import NewThreadTime, task_ids

HONEST = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""

OWN_THREAD = """
import threading, time, torch, torch.nn as nn
def burn():
    end = time.thread_time() + 0.004
    while time.thread_time() < end:
        pass
class ModelNew(nn.Module):
    def forward(self, a, b):
        t = threading.Thread(target=burn)   # a thread of its own, joined inside the call
        t.start()
        out = torch.mm(a, b)
        t.join()
        return out
"""


class Spinner:
    """A thread that keeps one core busy in native code (torch releases the GIL in its ops; the
    tensor is below torch's parallel grain, so no OpenMP team of the spinner's own appears)."""

    def __init__(self) -> None:
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        x = torch.ones(1 << 12)
        while not self.stop:
            x.mul_(1.0)

    def __enter__(self) -> Spinner:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop = True
        self.thread.join()


def _burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_new_thread_time_counts_a_thread_started_after_the_baseline_and_not_one_from_before():
    with Spinner():
        clock = NewThreadTime(task_ids())
        clock.start()
        time.sleep(0.05)                       # the spinner burns ~50 ms meanwhile
        assert clock.stop() < 0.005
        clock.start()
        t = threading.Thread(target=_burn, args=(0.03,))
        t.start()
        t.join()                               # started and finished inside the window
        spent = clock.stop()
    assert 0.025 < spent < 0.06


def test_an_honest_kernel_passes_while_a_thread_from_before_the_candidate_is_busy(kit):
    # what refused an honest -O3 loop on the 2-core machine: CPU time of threads that are not
    # the candidate's was charged to it (process time minus the caller's)
    with Spinner():
        report = kit.run("time", MATMUL, HONEST, timing_trials=20, warmup=2)
    assert report.status == Status.ok, report.message


def test_a_thread_of_the_candidates_own_during_the_timed_calls_is_refused(kit):
    report = kit.run("time", MATMUL, OWN_THREAD, timing_trials=20, warmup=2)
    assert report.status == Status.guard_violation
    assert "threads the candidate started" in report.message and "CPU cores" in report.message
