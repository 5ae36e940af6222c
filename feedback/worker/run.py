"""`run_job`: one `WorkerJob` in, one `WorkerReport` out, whatever happens in between.

Every failure becomes a report: a `JobFailure` carries its own status; any other exception (a
reference that breaks, a CUDA error that surfaces in trusted code after the candidate corrupted the
context, a bug here) is a `runtime_error` with its traceback, marked as raised outside the
candidate's own call so that nobody mistakes it for the candidate's message.
"""

from __future__ import annotations

import gc
import os
from time import perf_counter

import torch

from feedback import fastbuild
from feedback.job import AHEAD_ENV, WorkerJob, WorkerReport
from feedback.result import Status
from feedback.worker import audit, devices, harness, phases
from feedback.worker.caches import configure_environment
from feedback.worker.errors import JobFailure, format_exception

AHEAD = ("feedback.worker.correct", "feedback.worker.timing", "feedback.worker.environment",
         "torch.utils.cpp_extension", "numpy.random")
"""What a job imports on its way besides torch and this module: a standby worker imports them
before its job arrives (`import_ahead`), else the job does it while it holds the device (about
130 modules, setuptools through torch.utils.cpp_extension among them; H200 runs 43-44: the jobs'
`other` 0.60 -> 0.39 s with the first two ahead)."""


COMPILE_IMPORTS = ("torch._dynamo", "torch._inductor.compile_fx")
"""What a compile baseline's time job imports before it holds the device at all (timing.py); its
standby worker imports them ahead as well (`AHEAD_ENV` set to `compile`)."""


def import_ahead() -> None:
    import importlib

    compile_too = os.environ.get(AHEAD_ENV) == "compile"
    for name in AHEAD + (COMPILE_IMPORTS if compile_too else ()):
        try:
            importlib.import_module(name)
        except ImportError:  # numpy is optional to torch; the job then does without it too
            pass


def run_job(job: WorkerJob, in_process: bool = True, arrived: float | None = None) -> WorkerReport:
    """Dispatch on `job.kind`; never raises (except for interpreter-ending signals).

    `in_process` (tests, one interpreter for many jobs): afterwards, switch the job's audit hook
    off and let its harness go. The worker process passes False: the hook stays on and the harness
    (with the candidate's objects) stays alive until `os._exit`, so no finalizer of the candidate
    runs between the last integrity check and the report's serialisation.
    """
    start = perf_counter()
    phases.clear()
    devices.enforce_device_waits(not in_process)
    with phases.timed("configure"):
        configure_environment(job.extensions_dir, job.scratch_dir, job.options.arch)
        fastbuild.install(job.options.cache_dir)  # in every job: a re-import must not rebuild
    report = WorkerReport(nonce=job.nonce, status=Status.ok, kind=job.kind, role=job.role,
                          problem_id=job.problem.id)
    try:
        _dispatch(job, report)
    except JobFailure as failure:
        report.status, report.message = failure.status, failure.message
        report.correctness = failure.correctness or report.correctness
    except BaseException as exc:
        report.status = Status.runtime_error
        report.message = format_exception(exc, f"the {job.kind} job failed outside the candidate's call:")
    finally:
        if not in_process:
            gc.disable()  # no candidate finalizer may run from here on (see the docstring)
        if in_process:
            audit.retire_all()
            harness.KEEP_ALIVE.clear()
    with phases.timed("environment"):
        report.environment = _environment(job)
    report.seconds = perf_counter() - start
    parts = dict(phases.SECONDS)
    report.phases = {"start": round(start - arrived, 3) if arrived is not None else 0.0,
                     **{k: round(v, 3) for k, v in parts.items()},
                     "other": round(report.seconds - phases.top_level(parts), 3)}
    return report


def _dispatch(job: WorkerJob, report: WorkerReport) -> None:
    if job.kind == "build":
        from feedback.worker.build import run_build

        report.warnings = run_build(job)
    elif job.kind == "correct":
        from feedback.worker.correct import run_correct

        report.correctness, report.warnings, report.dispatched = run_correct(job)
    elif job.kind == "time" and job.role == "baselines":
        from feedback.worker.timing import run_baselines

        report.parts = [_part(job, role, outcome) for role, outcome in run_baselines(job)]
        failed = next((p for p in report.parts if p.status != Status.ok), None)
        if failed is not None:
            report.status, report.message = failed.status, f"the {failed.role} part: {failed.message}"
    elif job.kind == "time":
        from feedback.worker.timing import run_time

        _timed(report, run_time(job))
    elif job.kind == "profile":
        from feedback.worker.profiling import run_profile

        report.profile = run_profile(job)
    else:
        raise ValueError(f"unknown job kind {job.kind!r}")


def _timed(report: WorkerReport, result) -> None:
    """A time job's result (timing.TimingResult) into its report."""
    report.timing, report.noise, report.warnings = result.stats, result.noise, result.warnings
    report.flops, report.min_bytes = result.flops, result.min_bytes


def _part(job: WorkerJob, role: str, outcome) -> WorkerReport:
    """One part of a `baselines` job: the report its own time job would have written."""
    part = WorkerReport(nonce=job.nonce, status=Status.ok, kind=job.kind, role=role,
                        problem_id=job.problem.id)
    if isinstance(outcome, JobFailure):
        part.status, part.message = outcome.status, outcome.message
    else:
        _timed(part, outcome)
    return part


def _environment(job: WorkerJob):
    from feedback.worker.environment import describe_environment

    try:
        gpu = job.backend != "cpp" and job.kind != "build" and torch.cuda.is_available()
        return describe_environment(torch.device(job.options.device) if gpu else None, job.backend)
    except Exception:
        return None
