"""The `time` job: per-call times of the candidate, the eager reference or its torch.compile.

Inputs: `options.input_sets` buffers, each refilled with freshly drawn content (a new secret seed)
before every call, outside the timed window, so no two calls see the same content and a result
replayed by pointer, id, shape or content is wrong (issue 4, class 7). The buffers rotate, so the
last `input_sets` calls' outputs can be kept and re-checked against the reference (role
candidate), and an output that reuses the memory of one still held is refused (guards.py).

The candidate's timed loop carries the guards of probes.py (threads after every call, untimed
probe calls at secret positions and one after the last timed call, the CPU-time check on cpp).
Warm-up calls (`options.warmup`) run the same protocol untimed; the role `compiled` gets one extra
untimed first call, where torch.compile compiles, so that a failing compile is named as such.
The `eager` role also measures FLOPs and minimum bytes (cost.py).
"""

from __future__ import annotations

from typing import Any

import torch

from feedback.job import WorkerJob
from feedback.result import Status, TimingStats
from feedback.worker import clocks, cost, devices, guards, inputs
from feedback.worker.errors import JobFailure, candidate_error, format_exception
from feedback.worker.harness import Harness, call_reference, check_integrity, prepare
from feedback.worker.probes import TimingGuard
from feedback.worker.tolerance import compare


class TimingResult:
    """What the time job measured."""

    def __init__(self, stats: TimingStats, noise: float | None, warnings: list[str]):
        self.stats, self.noise, self.warnings = stats, noise, warnings
        self.flops: float | None = None
        self.min_bytes: float | None = None


def run_time(job: WorkerJob) -> TimingResult:
    policy = job.options.tolerance
    threads = job.options.cpu_threads if job.backend == "cpp" else None
    h = prepare(job if job.role == "candidate" else job.model_copy(update={"candidate_path": None}),
                with64=job.role == "candidate" and policy == "fp64-relative", cpu_threads=threads)
    program = _program(h, job)
    n_sets = job.options.input_sets
    seeds = [inputs.secret_seed() for _ in range(n_sets)]
    buffers = [inputs.make_inputs(h.problem, h.device, s) for s in seeds]
    outputs: list[Any] = [None] * n_sets
    clock = clocks.clock_for(h.device)
    times: list[float] = []
    total = job.options.warmup + job.options.timing_trials
    guard = TimingGuard(h, policy, job.options.warmup, total) if job.role == "candidate" else None
    clock.settle(job.options.settle_ms)
    clocks_mhz = [clock.sm_clock_mhz()]
    for call in range(total):
        k = call % n_sets
        others = [o for i, o in enumerate(outputs) if i != k]
        if guard is not None:
            guard.before(call, k, buffers, seeds, others)
        if call >= n_sets:
            seeds[k] = inputs.secret_seed()
            inputs.refill(buffers[k], inputs.make_inputs(h.problem, h.device, seeds[k]))
        outputs[k] = None
        try:
            if guard is not None and call >= job.options.warmup:
                ms, outputs[k] = guard.timed(lambda: clock.time(lambda: program(*buffers[k])))
            else:
                ms, outputs[k] = clock.time(lambda: program(*buffers[k]))
        except BaseException as exc:
            raise _call_failure(job, exc) from exc
        if guard is not None:
            guards.check_output(outputs[k], buffers[k], others)
            guard.after()
        if call >= job.options.warmup:
            times.append(ms)
    if guard is not None:
        check_integrity(h, "after the timed calls")
        guard.finish(job.options.cpu_threads)
        _recheck(h, policy, buffers, seeds, outputs, total)
        guard.final(buffers, seeds, outputs)
    clocks_mhz.append(clock.sm_clock_mhz())
    stats, noise = clocks.summarize(times, clock.name)
    if None not in clocks_mhz:
        stats = stats.model_copy(update={"sm_clock_mhz": clocks_mhz})
    result = TimingResult(stats, noise, sorted(set(h.notes)))
    if job.role == "eager":
        args = buffers[(total - 1) % n_sets]
        result.flops = cost.count_flops(h.reference, args)
        result.min_bytes = cost.min_bytes(h.reference, args, outputs[(total - 1) % n_sets])
    return result


def _program(h: Harness, job: WorkerJob):
    """The callable to time, under no_grad like every call in the worker."""
    if job.role == "candidate":
        model = h.candidate
    elif job.role == "eager":
        model = h.reference
    else:
        model = _compiled(h, job.options.compile_mode)

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return model(*args)
    return call


def _compiled(h: Harness, mode: str) -> Any:
    """torch.compile of the reference, compiled here by one untimed call."""
    try:
        model = torch.compile(h.reference, mode=mode)
        with torch.no_grad():
            model(*inputs.make_inputs(h.problem, h.device))
        devices.synchronize(h.device)
        return model
    except Exception as exc:
        raise JobFailure(Status.runtime_error, format_exception(
            exc, f"torch.compile(mode={mode!r}) of the reference failed (the compile baseline is "
                 "unavailable; this is not the candidate's fault):")) from exc


def _call_failure(job: WorkerJob, exc: BaseException) -> JobFailure:
    if job.role == "candidate":
        return candidate_error(exc, "ModelNew.forward raised during timing")
    return JobFailure(Status.runtime_error, format_exception(exc, f"the {job.role} reference failed during timing:"))


def _recheck(h: Harness, policy: str, buffers: list[Any], seeds: list[int], outputs: list[Any],
             total: int) -> None:
    """The outputs of the last timed calls must match the reference on those calls' inputs."""
    for k in range(min(len(buffers), total)):
        if h.reproducible:
            guards.check_inputs_untouched(buffers[k], inputs.make_inputs(h.problem, h.device, seeds[k]))
        ref, ref64 = call_reference(h, buffers[k], want64=policy == "fp64-relative")
        verdict = compare(outputs[k], ref, ref64, policy)
        if not verdict.ok:
            raise JobFailure(verdict.status, "an output of a timed call does not match the reference "
                             f"for that call's inputs (replayed or memoised result?): {verdict.message}")
