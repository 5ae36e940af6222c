"""Guards inside the timing loop (issue 4, classes 5, 7, 9, 11): the timed program is the checked one.

A candidate cannot tell the correct job from the time job by much (both give it fresh inputs),
but it can count calls, or notice that timing reuses input buffers. So the time job checks too,
without touching the timed window:

- after every call, outside the window: no thread the candidate started is still running
  (`ThreadCount`), and the output shares no memory with the inputs or with outputs still held;
- untimed probe calls among the timed ones, on the same rotating buffers refilled with fresh
  content: positions count timed samples (timing.py; a sample is one or several calls back to
  back), the least number of samples is cut into `PROBES` equal strata and one probe sits at a
  secret position in each; samples taken beyond that (sampling until the standard error is met)
  get one probe at a secret position in each further block of a stratum's length, or of
  `MIN_STRIDE` samples where strata are shorter, and one more probe runs after the last timed
  sample (`final`). Before each probe one output of the sample just
  timed, at a secret position within it, is checked against the reference too, so calls run back
  to back inside a sample are checked as well as calls that follow a pause. So behaving well only
  for the first N calls is caught for every N, and so is misbehaving during any contiguous run of
  timed calls at least two strata long (a quarter of them with 8 strata, well short of the half
  it takes to move the median); a probe's output must match the reference on those inputs, must
  not change after return (deferred work), the inputs must be untouched, and (policy `glue` or
  `strict`) the candidate's own compiled code must run (owncode.py);
- on the cpp backend, the CPU time of threads the candidate started during the timed calls:
  work on threads of its own (std::thread, an OpenMP team, torch.set_num_threads raised behind
  the harness's back) makes the host clock flatter than the reference's measurement, so more than
  `CPU_SLACK` cores' worth of it is refused. Measured per thread (cputime.py): only threads that
  did not exist when the candidate was imported count, so torch's own pool, an idle library pool
  and the machine's load never charge an honest kernel, however fast it is.

The last `input_sets` outputs are also re-checked after the loop (timing.py, `_recheck`).
"""

from __future__ import annotations

import secrets
from time import perf_counter
from typing import Any

import torch

from feedback.policy import own_code_violation
from feedback.result import Status
from feedback.worker import devices, guards, inputs
from feedback.worker.cputime import NewThreadTime
from feedback.worker.errors import JobFailure, candidate_error
from feedback.worker.harness import Harness, check_integrity, device_wait_s, judge_call

PROBES = 8
MIN_STRIDE = 4
"""Samples per probe beyond the least (the stratum of 30 least samples, the GPU's former
default). A probe with its spot check re-runs the reference, in float64 too, with the device held
alone: at a stratum of 2 (10 least samples) a program sampled on to 30 had 19 probes, and the
candidate time jobs' checks took 1.09 s against 0.79 s (H100, runs 63 and 68). A run of
2 x MIN_STRIDE misbehaving samples beyond the least always holds a probe: with 10 least samples
that is 8 of at least 18, short of the half it takes to move the median."""
CPU_SLACK = 0.1
"""Cores' worth of CPU time on threads the candidate started, tolerated (a thread that only
starts and joins)."""
MIN_WALL_S = 0.02
"""Below this much timed wall time the CPU-time ratio is noise and is not judged."""


def _one_per_stratum(start: int, stop: int, strata: int) -> list[int]:
    """A secret position in each of `strata` equal slices of range(start, stop)."""
    n = stop - start
    strata = min(strata, n)
    cuts = [start + i * n // strata for i in range(strata + 1)]
    return [lo + secrets.randbelow(hi - lo) for lo, hi in zip(cuts, cuts[1:])]


class TimingGuard:
    """The checks of the module docstring for one time job of the candidate."""

    def __init__(self, h: Harness, policy: str, warmup: int, total: int) -> None:
        self.h, self.policy = h, policy
        self.total = total
        self.probe_at = {total} | set(_one_per_stratum(warmup, total, PROBES))
        self.stride = max(MIN_STRIDE, -(-(total - warmup) // PROBES))
        self.beyond: dict[int, int] = {}
        self.new_s = self.wall_s = 0.0
        threads = h.threads if h is not None else None
        self.cpu = NewThreadTime(threads.tids) if threads is not None else None

    def is_probe(self, call: int) -> bool:
        """Whether a probe precedes timed sample `call` (one per block beyond `total`)."""
        if call < self.total:
            return call in self.probe_at
        block = (call - self.total) // self.stride
        if block not in self.beyond:
            self.beyond[block] = self.total + block * self.stride + secrets.randbelow(self.stride)
        return call == self.beyond[block] or call == self.total

    def before(self, call: int, k: int, buffers: list[Any], seeds: list[int], held: list[Any]) -> None:
        """An untimed probe on buffer `k` when `call` is a probe position."""
        if self.is_probe(call):
            self.probe(k, buffers, seeds, held)

    def probe(self, k: int, buffers: list[Any], seeds: list[int], held: list[Any]) -> None:
        """One untimed call on buffer `k`, refilled with fresh content, checked in full."""
        h = self.h
        seeds[k] = inputs.secret_seed()
        pristine = inputs.refill(buffers[k], inputs.make_inputs(h.problem, h.device, seeds[k]))
        own_calls = None
        try:
            with torch.no_grad():
                if h.own is not None:
                    out, own_calls = h.own.run(lambda: h.candidate(*buffers[k]))
                else:
                    out = h.candidate(*buffers[k])
            devices.check_launches(h.device, device_wait_s(h))
        except BaseException as exc:  # noqa: BLE001
            raise candidate_error(exc, "ModelNew.forward raised during timing") from exc
        guards.check_output(out, buffers[k], held)
        with guards.settling(out, h.device):  # the pause before the re-read: the checks below
            guards.check_inputs_untouched(buffers[k], pristine)
            check_integrity(h, "during the timed calls")
            if own_calls == 0:
                raise guards.violation(own_code_violation(["a call among the timed ones"]))
            verdict = judge_call(h, out, pristine, self.policy)
        if not verdict.ok:
            raise JobFailure(verdict.status, "a call among the timed ones returned a wrong result "
                             f"(replayed or memoised result, or different behaviour when timed?): "
                             f"{verdict.message}")

    def timed(self, run: Any) -> tuple[float, Any]:
        """`run()` (the clock's timed call), with the CPU time of threads the candidate started
        and the wall time around it accounted (a call cputime.py cannot measure is left out)."""
        if self.cpu is not None:
            self.cpu.start()
        wall = perf_counter()
        result = run()
        elapsed = perf_counter() - wall
        spent = self.cpu.stop() if self.cpu is not None else None
        if spent is not None:
            self.new_s += spent
            self.wall_s += elapsed
        return result

    def final(self, k: int, buffers: list[Any], seeds: list[int], held: list[Any]) -> None:
        """The probe after the last timed sample (its outputs already re-checked)."""
        self.probe(k, buffers, seeds, held)

    def after(self) -> None:
        """No thread the candidate started may outlive a timed call."""
        if self.h.threads is not None:
            self.h.threads.check("after a timed call", processes=False)

    def finish(self, cpu_threads: int) -> None:
        """The CPU-time check of the module docstring (cpp only)."""
        if self.h.device.type != "cpu" or self.wall_s < MIN_WALL_S:
            return
        extra = self.new_s / self.wall_s
        if extra > CPU_SLACK:
            raise JobFailure(Status.guard_violation, (
                f"work on threads of its own: during the timed calls threads the candidate started "
                f"burnt {extra:.2f} CPU cores' worth of time (std::thread, an OpenMP team or a "
                "raised torch thread count make the host clock unfair); compute on the calling "
                f"thread and the {cpu_threads} thread(s) torch gives you"))
