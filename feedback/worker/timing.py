"""The `time` job: per-call times of the candidate, the eager reference or its torch.compile.

Protocol (issue 15; the rules and their reasons are in sampling.py, clocks.py, probes.py):
1. The worker moves onto its device's CPU cores (pinning.py), the clock settles (`settle_ms`).
2. Warm-up: `warmup` single calls, whose median sets how many calls one timed sample runs back to
   back (`interval_ms`: 30 ms on a GPU, `max_calls_per_interval`, and the input memory; one for a
   program that leaves work on other streams, sampling.outlives_stream), then `SIZING_TRIALS`
   untimed samples of that many, whose time per call sets it again (more calls, never fewer;
   fewer only for a host-bound program, sampling.sizing); then untimed samples until their times
   are stable (`warmup_window`, or `warmup_s`). A window shorter than half `interval_ms` also
   measures its wake-up allowance after trusted waits (`_WaitedWakes`).
3. Timed samples alternate between two passes, A and B, each with input buffers of its own; at
   least `timing_trials` samples, more until the median's relative standard error is at most
   `timing_se` (or `timing_max_trials`, or `timing_budget_s`). The result's noise compares the two
   passes (sampling.noise).

Inputs: each pass holds max(ceil(`input_sets` / 2), calls per sample) buffers, each refilled with
freshly drawn content (a new secret seed) before every use, outside the timed window, so no two
calls see the same content and a result replayed by pointer, id, shape or content is wrong
(issue 4, class 7); every call of a sample has its own buffer. The outputs stay held until their
buffer's next use, so the last sample's outputs of each pass are re-checked against the reference
(role candidate: `SPOT_CHECKS` of them, drawn in secret), and an output that reuses the memory
of one still held is refused (guards.py).

The candidate's timed loop carries the guards of probes.py (threads after every sample, untimed
probe calls at secret positions and one after the last timed sample, the CPU-time check on cpp).
Warm-up runs the same protocol untimed; the role `compiled` gets one extra untimed first call,
where torch.compile compiles, so that a failing compile is named as such (its inductor build was
made before the job asked for the device, precompile.py: here it traces and finds it cached). The
`eager` role also measures FLOPs and minimum bytes (cost.py). The role `baselines` is `eager` then
`compiled` in one process: one set-up with the device shared, then each timed as above within one
hold of the device alone (`run_baselines`).
"""
from __future__ import annotations

import functools
import importlib
import secrets
import statistics
from time import perf_counter
from typing import Any

import torch

from feedback.job import BASELINE_ROLES, COMPILED_ROLES, WorkerJob
from feedback.result import Status, TimingStats
from feedback.worker import (
    clocks,
    cost,
    devices,
    guards,
    handoff,
    inputs,
    persist,
    phases,
    pinning,
    precompile,
    sampling,
)
from feedback.worker.errors import JobFailure, candidate_error, format_exception
from feedback.worker.harness import (
    Harness,
    check_integrity,
    judge_call,
    load_candidate,
    prepare,
    threads_for,
)
from feedback.worker.probes import TimingGuard
from feedback.worker.run import COMPILE_IMPORTS


class TimingResult:
    """What the time job measured."""

    def __init__(self, stats: TimingStats, noise: float | None, warnings: list[str]):
        self.stats, self.noise, self.warnings = stats, noise, warnings
        self.flops: float | None = None
        self.min_bytes: float | None = None


SPOT_CHECKS = 32
"""Outputs of each pass's last sample re-checked against the reference, drawn in secret (all of
them when there are fewer). A short kernel runs up to 512 calls per sample: re-checking all 1,024
outputs (each its inputs re-drawn and the reference run) took 3.4-3.7 s per candidate on the
H200, inside its hold of the device alone. A program that returns wrong results on a share f of
its calls survives the 64 checks with probability (1 - f)^64 (f = 5%: 4%), besides the probes
and the spot check at each probe; all while it cannot know which of its held outputs is read."""


def _secret_subset(ks: list[int], most: int) -> list[int]:
    """`most` of `ks` drawn with the system's secret randomness, or all of them."""
    return ks if len(ks) <= most else secrets.SystemRandom().sample(ks, most)


INPUT_MEMORY = {"cuda": 4 << 30, "cpu": 512 << 20}
"""Bytes of input and output buffers the calls-per-sample may use, both passes together; on a GPU
at least this, or half the device memory free once the first pass is allocated (`_input_memory`)."""


class Pass:
    """One timing pass: its own input buffers, their seeds, and the outputs still held."""

    def __init__(self, h: Harness, n_sets: int) -> None:
        self.h = h
        self.seeds = [inputs.secret_seed() for _ in range(n_sets)]
        with phases.timed("refill"):
            self.buffers = [inputs.make_inputs(h.problem, h.device, s) for s in self.seeds]
        self.refills: list[float] = []  # host ms of each refill (the device's part runs on)
        self.outputs: list[Any] = [None] * n_sets
        self.used = [False] * n_sets
        self.next = 0
        self.last: list[int] = []

    def take(self, calls: int) -> list[int]:
        """The buffers of the next sample, each refilled with fresh content when used before."""
        ks = [(self.next + i) % len(self.buffers) for i in range(calls)]
        self.next = (self.next + calls) % len(self.buffers)
        for k in ks:
            self.outputs[k] = None
            if self.used[k]:
                start = perf_counter()
                self.seeds[k] = inputs.secret_seed()
                inputs.refill(self.buffers[k], inputs.make_inputs(self.h.problem, self.h.device,
                                                                  self.seeds[k]))
                self.refills.append((perf_counter() - start) * 1e3)
            self.used[k] = True
        return ks


def _held(passes: list[Pass], mine: Pass, k: int) -> list[Any]:
    """Every output still held except slot `k` of `mine`."""
    return [o for p in passes for i, o in enumerate(p.outputs) if o is not None and not (p is mine and i == k)]


class Sampler:
    """Runs samples of one program under the clock (and the guard, for the candidate)."""

    def __init__(self, role: str, h: Harness, program: Any, clock: clocks.Clock,
                 guard: TimingGuard | None) -> None:
        self.role, self.h, self.program, self.clock, self.guard = role, h, program, clock, guard
        self.passes: list[Pass] = []
        self.launches: list[float] = []  # the timed samples' host time per call (GPU)
        self.tails: list[float] = []  # the timed samples' window tails (GPU, clocks.py)
        self.wakes: list[float] = []  # the timed samples' wake-up allowances (GPU, clocks.py)

    def sample(self, p: Pass, calls: int, timed: bool) -> float:
        """One sample of `calls` calls on pass `p`: milliseconds per call."""
        with phases.timed("refill"):
            ks = p.take(calls)
        program = self.program
        fns = [functools.partial(program, *p.buffers[k]) for k in ks]

        def run() -> tuple[float, list[Any]]:
            return self.clock.interval(fns)
        try:
            with phases.timed("windows" if timed else "warmup"):
                ms, outs = self.guard.timed(run) if self.guard is not None and timed else run()
        except persist.PersistenceViolation as exc:
            raise JobFailure(Status.guard_violation, str(exc)) from exc
        except BaseException as exc:
            raise _call_failure(self.role, exc) from exc
        if timed and self.clock.launch_ms is not None:
            self.launches.append(self.clock.launch_ms)
        if timed and self.clock.tail_ms is not None:
            self.tails.append(self.clock.tail_ms)
        if timed and self.clock.wake_ms is not None:
            self.wakes.append(self.clock.wake_ms)
        for k, out in zip(ks, outs):
            p.outputs[k] = out
        if self.guard is not None:
            with phases.timed("checks"), phases.timed("checks/outputs"):
                for k in ks:
                    guards.check_output(p.outputs[k], p.buffers[k])
                guards.check_apart([o for q in self.passes for o in q.outputs if o is not None])
            with phases.timed("checks"), phases.timed("checks/threads"):
                self.guard.after()
        p.last = ks
        return ms


def run_time(job: WorkerJob) -> TimingResult:
    """Time `job.role`'s program (module docstring); a failure raises JobFailure."""
    candidate = job.role == "candidate"
    _before_device(job)
    h = _prepare_shared(job)
    least = sampling.min_trials(job.options, h.device.type)
    if not candidate:
        sampler = _sampler(job.role, job, h, least)  # torch.compile's call among it, still shared
    with phases.timed("handoff"):
        handoff.exclusive()
    if candidate:
        load_candidate(h)
        sampler = _sampler(job.role, job, h, least)
    return _measure(job, job.role, h, sampler, least)


def run_baselines(job: WorkerJob) -> list[tuple[str, TimingResult | JobFailure]]:
    """The role `baselines`: each of BASELINE_ROLES timed as its own time job would time it, after
    one shared set-up (torch.compile's compile among it) and within one hold of the device alone;
    a part that fails (a failing torch.compile) does not stop the other."""
    _before_device(job)
    h = _prepare_shared(job)
    least = sampling.min_trials(job.options, h.device.type)
    ready: dict[str, Sampler | JobFailure] = {}
    for role in BASELINE_ROLES:
        try:
            ready[role] = _sampler(role, job, h, least)
        except JobFailure as failure:
            ready[role] = JobFailure(failure.status, failure.message)
    with phases.timed("handoff"):
        handoff.exclusive()
    parts: list[tuple[str, TimingResult | JobFailure]] = []
    for role in BASELINE_ROLES:
        parts.append((role, _measured(job, role, h, ready.pop(role), least)))
        # the part's buffers are gone: the next part sizes its samples on the free memory
        devices.release_cached_memory(h.device)
    return parts


def _measured(job: WorkerJob, role: str, h: Harness, sampler: Sampler | JobFailure,
              least: int) -> TimingResult | JobFailure:
    """`_measure`, or its failure without the traceback (whose frames hold the part's buffers)."""
    if isinstance(sampler, JobFailure):
        return sampler
    try:
        return _measure(job, role, h, sampler, least)
    except JobFailure as failure:
        return JobFailure(failure.status, failure.message)


def _before_device(job: WorkerJob) -> None:
    """What a time job does before it holds the device at all (handoff.py): torch.compile's
    imports and inductor's build for a job that times the compiled reference."""
    if job.role not in COMPILED_ROLES:
        return
    with phases.timed("imports"):  # a standby worker imported them ahead (run.py)
        for name in COMPILE_IMPORTS:
            importlib.import_module(name)
    with phases.timed("precompile"):  # likewise: inductor's build, cached for `_compiled`
        precompile.build(job, devices.job_device(job.backend, job.options.device),
                         threads_for(job))


def _prepare_shared(job: WorkerJob) -> Harness:
    """The trusted set-up (problem, reference, CUDA) with the device shared; no candidate code
    runs in this process before it holds the device alone (handoff.py)."""
    candidate, policy = job.role == "candidate", job.options.tolerance
    with phases.timed("shared_wait"):
        handoff.shared()
    return prepare(job if candidate else job.model_copy(update={"candidate_path": None}),
                   with64=candidate and policy == "fp64-relative", cpu_threads=threads_for(job),
                   load=False)


def _measure(job: WorkerJob, role: str, h: Harness, sampler: Sampler, least: int) -> TimingResult:
    """Steps 1-3 of the module docstring for `role`'s program, the device held alone."""
    policy, opts = job.options.tolerance, job.options
    clock, guard = sampler.clock, sampler.guard
    with phases.timed("setup"):
        pinned = pinning.pin(job.cores)
        clock.settle(opts.settle_ms)
    with phases.timed("clock_reads"):
        clocks_mhz = [clock.sm_clock_mhz()]

    per_pass = max(-(-opts.input_sets // 2), 1)
    first = Pass(h, per_pass)
    sampler.passes = [first]
    warm, warm_tails = [], []
    for _ in range(max(opts.warmup, 1)):
        warm.append(sampler.sample(first, 1, timed=False))
        if clock.tail_ms is not None:
            warm_tails.append(clock.tail_ms)
    overlaps = sampling.outlives_stream(warm_tails)
    room = _input_memory(h.device) // max(2 * h.io_bytes, 1)

    def calls_for(call_ms: float, draw_ms: float = 0.0) -> int:
        return sampling.calls_per_interval(call_ms, sampling.interval_ms(opts, h.device.type),
                                           sampling.max_calls(opts, h.device.type), max(room, 1),
                                           draw_ms)
    call_ms = statistics.median(warm)
    calls = 1 if overlaps else calls_for(call_ms)
    if calls > 1:
        # a single call's window carries all of the window's fixed host time (H200: ~0.1 ms
        # on a 0.1 ms kernel, which halved the calls); one untimed sample of `calls` calls
        # carries 1/calls of it, so its time per call sizes the samples (more calls, never
        # fewer), unless the program is host-bound (sampling.host_bound)
        trial = first if calls <= per_pass else Pass(h, calls)
        sampler.passes = [trial]
        tried = []
        for _ in range(SIZING_TRIALS):
            tried.append((sampler.sample(trial, calls, timed=False), clock.launch_ms))
        per_call, launch = sampling.sizing(tried)
        call_ms = per_call
        calls = max(calls, calls_for(per_call))
        if sampling.host_bound(launch, per_call) and first.refills:
            calls = min(calls, calls_for(per_call, statistics.median(first.refills)))
        sampler.passes, trial = [first], None  # its buffers go back before the passes' are made
    a, b = (first if calls <= per_pass else Pass(h, calls)), Pass(h, max(per_pass, calls))
    sampler.passes = [a, b]
    wakes = _WaitedWakes(clock, calls * call_ms, opts)
    for _ in range(WAITED_WAKES_AHEAD):
        wakes.measure()
    settling, start = [], perf_counter()
    while (opts.warmup and not sampling.warmed_up(settling, opts.warmup_window)
           and perf_counter() - start < opts.warmup_s):
        settling.append(sampler.sample((a, b)[len(settling) % 2], calls, timed=False))

    times: tuple[list[float], list[float]] = ([], [])
    most = sampling.max_trials(opts, h.device.type)
    start, last = perf_counter(), None
    while True:
        i = len(times[0]) + len(times[1])
        p = (a, b)[i % 2]
        if guard is not None and guard.is_probe(i):
            with phases.timed("checks"):
                if last is not None:
                    with phases.timed("checks/spot"):
                        _spot_check(h, policy, *last)
                k = p.next
                with phases.timed("checks/probes"):
                    guard.probe(k, p.buffers, p.seeds, _held(sampler.passes, p, k))
            p.used[k] = True  # the timed call on this buffer gets content the probe never saw
        if i % WAITED_WAKE_EVERY == 0:
            wakes.measure()
        times[i % 2].append(sampler.sample(p, calls, timed=True))
        last = (p, secrets.choice(p.last))
        n = i + 1
        if n >= 2 and (sampling.enough([*times[0], *times[1]], least, most, opts.timing_se)
                       or (n >= least and perf_counter() - start > opts.timing_budget_s)):
            break
    if guard is not None:
        with phases.timed("checks"), phases.timed("checks/integrity"):
            check_integrity(h, "after the timed calls")
            guard.finish(opts.cpu_threads)
        with phases.timed("spot_checks"):
            for p in (a, b):
                for k in _secret_subset(p.last, SPOT_CHECKS):
                    _spot_check(h, policy, p, k)
        with phases.timed("checks"), phases.timed("checks/probes"):
            k = a.next
            guard.final(k, a.buffers, a.seeds, _held(sampler.passes, a, k))
    with phases.timed("clock_reads"):
        clocks_mhz.append(clock.sm_clock_mhz())
    stats = sampling.summarize(times[0], times[1], clock.name, calls, sampler.launches,
                               sampler.tails, sampler.wakes)
    if None not in clocks_mhz:
        stats = stats.model_copy(update={"sm_clock_mhz": clocks_mhz})
    notes = sorted(set(h.notes))
    if overlaps:
        notes.append(f"work left running on other streams after forward() returned (a single "
                     f"call's window ended {statistics.median(warm_tails):.3g} ms after its own "
                     "stream was done): timed one call per window, so calls cannot overlap")
    if sampling.host_bound(stats.launch_ms, stats.median_ms):
        notes.append(f"host-bound timing: launching the calls took {stats.launch_ms:.4g} ms of "
                     f"host time per call against {stats.median_ms:.4g} ms per call timed, so "
                     "the time reflects the host's speed and load as much as the device's")
    if job.cores and pinned is None:
        notes.append(f"the timing worker could not be moved onto CPU cores {job.cores}")
    result = TimingResult(stats, stats.noise, notes)
    if role == "eager":
        k = a.last[-1]
        with phases.timed("cost"):
            result.flops = cost.count_flops(h.reference, a.buffers[k])
            result.min_bytes = cost.min_bytes(h.reference, a.buffers[k], a.outputs[k])
    return result


SIZING_TRIALS = 2
"""Untimed samples of the first sizing's calls that size the samples again (sampling.sizing)."""

WAITED_WAKES_AHEAD, WAITED_WAKE_EVERY, WAITED_WAKES_KEPT = 3, 4, 5
"""`EvalOptions.wake_after_wait`: waited wake-ups measured before the timed samples, then one
before every WAITED_WAKE_EVERY-th sample; the allowance is the median of the last KEPT."""


class _WaitedWakes:
    """The wake-up allowance of a short window's end (`CudaClock.waited_wake`), measured after a
    trusted wait as long as the window, when `EvalOptions.wake_after_wait` asks for it and the
    window is shorter than half the target sample length (its calls' inputs fill the memory):
    there the host's part of the window's end is a share that moved between evaluations with the
    host's load (H200: the 1.7 ms relu's 5-call windows, docs/benchmarks.md P3). The allowance
    stays capped by sampling.SIDE_TAIL_MS and by the window's own tail (sampling.window_ms)."""

    def __init__(self, clock: clocks.Clock, window_ms: float, opts) -> None:
        self.clock, self.window_ms, self.seen = clock, window_ms, []
        self.on = (opts.wake_after_wait and isinstance(clock, clocks.CudaClock)
                   and window_ms < sampling.interval_ms(opts, clock.device.type) / 2)

    def measure(self) -> None:
        if not self.on:
            return
        with phases.timed("wakes"):
            self.seen.append(self.clock.waited_wake(self.window_ms))
        self.clock.wake_floor_ms = statistics.median(self.seen[-WAITED_WAKES_KEPT:])


def _sampler(role: str, job: WorkerJob, h: Harness, least: int) -> Sampler:
    """`role`'s program to time (a compile baseline's compiled here), its clock and, for the
    candidate, the timing loop's guards (over at least `least` timed samples)."""
    program = _program(h, role, job.options.compile_mode)
    with phases.timed("setup"):
        clock = clocks.clock_for(h.device, job.options.flush_ahead,
                                 lead=job.options.trusted_lead and role != "candidate")
        guard = TimingGuard(h, job.options.tolerance, 0, least) if role == "candidate" else None
        return Sampler(role, h, program, clock, guard)


def _input_memory(device: torch.device) -> int:
    """The module's INPUT_MEMORY for `device` (on a GPU, half its free memory when that is more)."""
    if device.type == "cpu":
        return INPUT_MEMORY["cpu"]
    try:
        free, _ = torch.cuda.mem_get_info(device)
    except Exception:  # noqa: BLE001 - the fixed budget stands
        free = 0
    return max(INPUT_MEMORY["cuda"], free // 2)


def _program(h: Harness, role: str, compile_mode: str):
    """The callable to time, under no_grad like every call in the worker."""
    if role == "candidate":
        model = h.candidate
    elif role == "eager":
        model = h.reference
    else:
        model = _compiled(h, compile_mode)

    def call(*args: Any) -> Any:
        with torch.no_grad():
            return model(*args)
    return call


def _compiled(h: Harness, mode: str) -> Any:
    """torch.compile of the reference, compiled here by one untimed call."""
    try:
        with phases.timed("compile"):
            model = torch.compile(h.reference, mode=mode)
            with torch.no_grad():
                model(*inputs.make_inputs(h.problem, h.device))
            devices.synchronize(h.device)
        return model
    except Exception as exc:
        raise JobFailure(Status.runtime_error, format_exception(
            exc, f"torch.compile(mode={mode!r}) of the reference failed (the compile baseline is "
                 "unavailable; this is not the candidate's fault):")) from exc


def _call_failure(role: str, exc: BaseException) -> JobFailure:
    if role == "candidate":
        return candidate_error(exc, "ModelNew.forward raised during timing")
    return JobFailure(Status.runtime_error, format_exception(exc, f"the {role} reference failed during timing:"))


def _spot_check(h: Harness, policy: str, p: Pass, k: int) -> None:
    """The output held for buffer `k` of pass `p` must match the reference on that buffer's inputs
    (which must be as drawn)."""
    if h.reproducible:
        guards.check_inputs_untouched(p.buffers[k], inputs.make_inputs(h.problem, h.device, p.seeds[k]))
    verdict = judge_call(h, p.outputs[k], p.buffers[k], policy)
    if not verdict.ok:
        raise JobFailure(verdict.status, "a call among the timed ones returned a wrong result: "
                         "its output does not match the reference for that call's inputs "
                         f"(replayed or memoised result?): {verdict.message}")
