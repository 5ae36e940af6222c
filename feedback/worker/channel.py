"""The worker's private channel to the parent, and the parent's check of what came through it.

Why not files in the scratch directory (the first design): the candidate's working directory *is*
the scratch directory, so it could read the job (and its nonce) and write a report of its own.
Now (issue 4, class 13):

- the job arrives on stdin, from a file the parent has already unlinked; the worker reads it and
  points fd 0 at /dev/null, so no path leads back to it;
- the report leaves through another unlinked file, of which the child inherits a *read-only*
  descriptor (moved to a random high number): writing to it fails, so guessing descriptor numbers
  gets a candidate nowhere. The worker reopens it for writing through /proc/self/fd only for the
  moment of each write; the audit hook refuses `/proc/self/...` and `/dev/fd/...` to code called
  from the candidate (audit.py), and the worker makes itself non-dumpable (`seal`), so that no
  other process (a compiler run with forged flags, a forked helper) can reach /proc/<pid>/fd;
- before the candidate is imported the worker writes a *hello* frame echoing the nonce, then
  erases the nonce from its memory (the job it keeps has an empty one): the candidate's code never
  shares the process with a secret it could echo;
- the parent accepts exactly two frames, hello then one report, and only a report that matches
  its own job (kind, role, problem) and whose numbers are sane (`check`): a third frame, a missing
  hello or a report for another job is a forgery.

What this cannot stop, said in docs/security.md: native code in the worker process (the
candidate's own C++) can reopen the file the same way and write a well-formed report, then exit;
the consistency checks and the roofline's speed-of-light flag are the only defence left there.

Frames are single lines of JSON (`model_dump_json` never emits a newline). This module imports
neither torch nor the candidate: the parent uses it too.
"""

from __future__ import annotations

import json
import math
import os
import secrets

from pydantic import ValidationError

from feedback.job import BASELINE_ROLES, WorkerJob, WorkerReport
from feedback.result import Status

MAX_CHANNEL_BYTES = 16 * 1024 * 1024
MAX_EXTRA_TRIALS = 8
"""Trials a passing correctness report may add to `correctness_trials` (stress + extra size)."""
_CLOCKS = {"cpp": "host_wall", "cuda": "cuda_events", "triton": "cuda_events"}
_FORBIDDEN = {"build": {Status.timeout, Status.static_reject, Status.shape_mismatch, Status.mismatch},
              "correct": {Status.timeout, Status.static_reject},
              "time": {Status.timeout, Status.static_reject},
              "profile": {Status.timeout, Status.static_reject}}


def read_job(fd: int = 0) -> bytearray:
    """Everything on `fd` (the job's JSON), then fd 0 becomes /dev/null."""
    data = bytearray()
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return data


def seal() -> bool:
    """Make this process non-dumpable: /proc/<pid>/fd of the worker then needs CAP_SYS_PTRACE
    (which the sandbox drops), so no other process, not even a compiler the candidate's build
    runs with forged flags, can reopen the report file; the worker itself still can."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        return False


def hide(fd: int, nofile: int = 4096) -> int:
    """Move the report descriptor to a random free number >= 64 and close the inherited one."""
    for _ in range(64):
        target = 64 + secrets.randbelow(max(1, nofile - 65))
        try:
            os.fstat(target)
        except OSError:
            os.dup2(fd, target, inheritable=False)
            os.close(fd)
            return target
    return fd


def write_frame(fd: int, frame: str, _write=os.write, _open=os.open, _close=os.close) -> None:
    """Append one line through a write descriptor opened just for it from the read-only `fd`.
    The os functions are bound when this module is imported, before any candidate exists."""
    out = _open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_APPEND)
    try:
        data = (frame + "\n").encode()
        while data:
            data = data[_write(out, data):]
    finally:
        _close(out)


def hello(job_kind: str, role: str, nonce: str) -> str:
    return json.dumps({"hello": nonce, "kind": job_kind, "role": role})


def accept(text: str, job: WorkerJob) -> tuple[WorkerReport | None, str]:
    """The report in `text` if the channel holds exactly hello + one report for `job`; else
    (None, why)."""
    frames = [line for line in text.split("\n") if line.strip()]
    if not frames:
        return None, "no report"
    try:
        first = json.loads(frames[0])
    except ValueError:
        first = None
    if not isinstance(first, dict) or not secrets.compare_digest(str(first.get("hello", "")), job.nonce):
        return None, "the channel does not start with the worker's hello"
    if len(frames) == 1:
        return None, "no report"
    if len(frames) > 2:
        return None, f"{len(frames) - 1} reports on the channel where the worker writes one"
    try:
        report = WorkerReport.model_validate_json(frames[1])
    except (ValidationError, ValueError):
        return None, "the report is not a valid WorkerReport"
    problem = check(report, job)
    return (None, problem) if problem else (report, "")


def check(report: WorkerReport, job: WorkerJob) -> str:
    """'' when `report` can be the answer to `job`, else what is wrong with it."""
    echoed = {"kind": job.kind, "role": job.role, "problem_id": job.problem.id}
    for name, want in echoed.items():
        got = getattr(report, name, want)
        if got != want:
            return f"the report answers {name} {got!r}, the job was {want!r}"
    if report.status in _FORBIDDEN[job.kind]:
        return f"a {job.kind} job cannot end with status {report.status.value}"
    if job.role == "baselines":
        return _check_parts(report, job)
    if report.status != Status.ok:
        return ""
    if job.kind == "correct":
        return _check_correct(report, job)
    if job.kind == "time":
        return _check_time(report, job)
    if job.kind == "profile" and report.profile is None:
        return "a passing profile job without a profile"
    return ""


def _check_correct(report: WorkerReport, job: WorkerJob) -> str:
    c, want = report.correctness, job.options.correctness_trials
    if c is None:
        return "a passing correctness job without its correctness record"
    if c.trials_passed != c.trials or not want <= c.trials <= want + MAX_EXTRA_TRIALS:
        return f"passing with {c.trials_passed} of {c.trials} trials (asked for {want})"
    errors = [c.max_abs_err, c.mean_abs_err, c.max_rel_err, c.mean_rel_err]
    if any(e is not None and not (math.isfinite(e) and e >= 0) for e in errors):
        return "error statistics that are negative or not finite"
    return ""


def _check_parts(report: WorkerReport, job: WorkerJob) -> str:
    """A `baselines` job's parts: one per role in the job's order, each as its own time job's
    report would be checked, none passing where the job says it failed; a job that failed
    before its parts (its reference, say) has none."""
    roles = tuple(part.role for part in report.parts)
    if not report.parts and report.status != Status.ok:
        return ""
    if roles != BASELINE_ROLES:
        return f"a baselines job's parts are {list(roles)}, not {list(BASELINE_ROLES)}"
    if (report.status == Status.ok) != all(p.status == Status.ok for p in report.parts):
        return "a baselines job's status disagrees with its parts'"
    for part in report.parts:
        problem = check(part, job.model_copy(update={"role": part.role}))
        if problem:
            return f"its {part.role} part: {problem}"
    return ""


def _check_time(report: WorkerReport, job: WorkerJob) -> str:
    t = report.timing
    if t is None:
        return "a passing timing job without timings"
    from feedback.worker.sampling import max_trials, min_trials

    device = "cpu" if job.backend == "cpp" else "cuda"
    least, most = min_trials(job.options, device), max_trials(job.options, device)
    if not least <= t.n <= most:
        return f"{t.n} timed samples reported, {least} to {most} asked"
    if t.clock != _CLOCKS[job.backend]:
        return f"clock {t.clock!r} on the {job.backend} backend"
    values = [t.min_ms, t.median_ms, t.mean_ms, t.max_ms, t.std_ms]
    if not all(math.isfinite(v) and v >= 0 for v in values) or not t.min_ms <= t.median_ms <= t.max_ms \
            or not t.min_ms <= t.mean_ms <= t.max_ms or t.max_ms <= 0:
        return "timings that are not a consistent set of positive numbers"
    return ""
