"""The contract between the evaluator (parent) and its worker children.

The parent hands a `WorkerJob` to `python -m feedback.worker --channel FD` on stdin (an unlinked
file, or a pipe for a worker started ahead of its job: `standby_workers`) and reads the `WorkerReport` back from descriptor FD (another unlinked file), never from
stdout or a path the candidate could write: the worker's hello frame must echo the job's nonce,
exactly one report must follow, and it must answer this job with sane numbers
(feedback/worker/channel.py), or the parent treats it as forged.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from feedback import bytecode, cores
from feedback.cache import digest, locked
from feedback.environment import REPO_ROOT, child_env
from feedback.options import Backend, EvalOptions
from feedback.result import Correctness, Environment, Profile, Status, TimingStats
from feedback.sandbox import (
    POLL_S,
    ChildOutcome,
    Started,
    over_memory,
    readable,
    run_child,
    start_child,
    wait_child,
)
from problems.record import Problem

DEVICE_WAIT_EXIT = 3
"""The worker's exit status when a candidate's device work outlived its limit after forward()
returned (feedback/worker/devices.py, `device_wait_limit`), with DEVICE_WAIT_SAID on stderr:
both together are reported as a time-out (a candidate's own `os._exit(3)` is an exit status)."""
DEVICE_WAIT_SAID = "the candidate's device work did not finish within"


class WorkerJob(BaseModel):
    """One unit of child-side work."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["build", "correct", "time", "profile"] = Field(
        description="`build` imports the candidate (compiling it into extensions_dir); `correct` "
        "checks it; `time` / `profile` measure `role`.")
    role: Literal["candidate", "eager", "compiled", "baselines"] = Field(
        default="candidate", description="Which program `time`/`profile` measure; `baselines` "
        "(time): `eager` then `compiled`, in one process and one hold of the device, each "
        "reported as a part.")
    problem: Problem
    backend: Backend
    options: EvalOptions
    candidate_path: str | None = Field(default=None, description="The candidate's own file.")
    extensions_dir: str = Field(description="TORCH_EXTENSIONS_DIR / TRITON_CACHE_DIR root of the build.")
    scratch_dir: str = Field(description="The only writable directory of the child.")
    result_path: str = Field(description="Where the child writes its WorkerReport JSON.")
    nonce: str = Field(description="Random token the report must echo.")
    cores: list[int] | None = Field(default=None, description="`time` jobs: the CPU cores the "
                                    "worker moves onto before its timed loop (feedback/cores.py).")
    alone: bool = Field(default=False, description="Run again, with the device to itself, after "
                        "it ran short of memory beside other jobs: running short now is its own "
                        "need (harness.call_reference).")


class WorkerReport(BaseModel):
    """What a child found. `status` ok = this unit of work passed."""

    nonce: str
    status: Status
    kind: str | None = Field(default=None, description="The job's kind, echoed for the parent's check.")
    role: str | None = Field(default=None, description="The job's role, echoed.")
    problem_id: str | None = Field(default=None, description="The job's problem, echoed.")
    message: str = ""
    correctness: Correctness | None = None
    timing: TimingStats | None = None
    noise: float | None = None
    profile: Profile | None = None
    flops: float | None = None
    min_bytes: float | None = None
    dispatched: dict[str, int] | None = Field(
        default=None, description="Operators (`aten::mm`) the candidate's forward dispatched in "
        "one call, with counts; filled by a passing `correct` job (feedback/worker/ops.py).")
    warnings: list[str] = Field(default_factory=list)
    parts: list[WorkerReport] = Field(
        default_factory=list, description="A `baselines` job's reports of its roles, each as its "
        "own time job would have written it (status, timing, FLOPs); its own status is its first "
        "failed part's.")
    environment: Environment | None = None
    seconds: float = 0.0
    phases: dict[str, float] = Field(
        default_factory=dict, description="Seconds per phase inside the worker: `start` (the "
        "job's arrival to its dispatch: imports, checks), `prepare` (problem, reference and "
        "candidate loaded, CUDA up), a time job's `warmup`, `refill` (fresh inputs), `windows` "
        "(the timed samples), `checks` (guards and probes; by part: `checks/outputs` (each sample's "
        "outputs' memory), `checks/threads`, `checks/spot` (a held output before each probe), "
        "`checks/probes`, `checks/integrity`), `spot_checks` (outputs of the last "
        "samples re-checked), `wakes` (waited wake-ups, `EvalOptions.wake_after_wait`), a "
        "reference's `imports` and `shared_wait` (before it holds the "
        "device), `compile` (torch.compile), `handoff` (its wait for the device alone), `cost` "
        "(FLOPs and bytes), `clock_reads` (the SM clock before and after), `environment` (the "
        "report's device and versions), `configure` (caches and the build hook named), a time "
        "job's `setup` (clock, guards, cores), a correctness job's `kernels` (the device kernels "
        "of one call, profiled), `precompile` (the compile baseline's inductor build, before it "
        "holds the device), `other` (the rest: a correctness job's work). "
        "Where a job's time goes, for benchmarks and `make gpu-check`; no verdict reads it.")


RUN_FILE_BYTES = 256 * 1024 ** 2
"""RLIMIT_FSIZE of a child running candidate code: its stdout and any file it writes."""
BUILD_FILE_BYTES = 4 * 1024 ** 3
"""RLIMIT_FSIZE of builds and baselines: objects, .so files and Inductor's precompiled headers."""


class JobRun(BaseModel):
    """A job's report as the parent accepts it, with how the child ended."""

    report: WorkerReport = Field(description="The child's report, or one the parent wrote for it "
                                 "when the child crashed, hung or left no valid report.")
    outcome: ChildOutcome = Field(description="How the child process ended.")
    trusted: bool = Field(description="True when `report` came from the child and validated.")


def worker_entry() -> list[str]:
    """The child's command line, before the job file's path."""
    return [sys.executable, "-m", "feedback.worker"]


def _worker_argv(channel_fd: int, pipes: tuple[int, int] | None = None) -> list[str]:
    """A worker reporting on `channel_fd`; with `pipes` (its signal and go descriptors), a
    standby one (feedback/worker/handoff.py)."""
    standby = ["--standby", *map(str, pipes)] if pipes is not None else []
    return [*worker_entry(), "--channel", str(channel_fd), *standby]


AHEAD_ENV = "KERNEL_REFINE_AHEAD"
"""Set to `compile` in the environment of a compile baseline's time job: its standby worker then
imports torch.compile's modules too before it says it is ready (feedback/worker/run.py,
`import_ahead`). Those imports took 6-10 s per compile baseline on a busy H200 host (runs 43-44),
between the job's delivery and its first use of the device, while the device waited for work."""

BASELINE_ROLES = ("eager", "compiled")
"""What a `baselines` time job times, in this order, in one process and one hold of the device
(feedback/worker/timing.py), each reported as a part: a new problem's two baselines were two jobs,
each with its own process, set-up, handoff and report."""

COMPILED_ROLES = ("compiled", "baselines")
"""The time jobs' roles that compile the reference with torch.compile."""


def compiles_reference(kind: str, role: str) -> bool:
    """Whether a job compiles the reference with torch.compile (a baseline's time job)."""
    return kind == "time" and role in COMPILED_ROLES


def inductor_env(kind: str, role: str, cache_dir: Path | str) -> dict[str, str]:
    """Inductor's settings in a job's environment.

    A job that compiles the reference shares Inductor's cache (`<cache>/inductor`, written and
    read by trusted code alone). Every other job, a candidate's above all, keeps Inductor's cache
    in its scratch folder (caches.py), so nothing a candidate writes reaches a baseline's compile
    (the FX graph cache holds pickles).

    Every job compiles in its own process. In a candidate's job the pool of compile processes,
    and the timer thread that watches it, would outlive its forward() when it calls
    torch.compile, and fail the thread and process guards. In a baseline's the pool (a process
    that imports torch, then one worker per core) cost 7.9 CPU s per problem for a graph of a
    few kernels, on a host whose 16 CPUs were all busy and whose builds waited for them (H100,
    runs 82-83: 323 CPU s of 3,583 in a framework arm)."""
    threads = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
    if compiles_reference(kind, role):
        # AHEAD_ENV: its own spec, so its standby worker imports torch.compile ahead for it
        return {"TORCHINDUCTOR_CACHE_DIR": str(Path(cache_dir).resolve() / "inductor"),
                AHEAD_ENV: "compile", **threads}
    return threads


READY, CONTEXT, SHARED, PREPARED = b"R", b"C", b"S", b"P"
"""What a standby worker writes on its signal pipe: its imports are done; its CUDA context is
made (asked with CONTEXT on its go pipe before its job arrives); (a `prepares_shared` job) its
set-up that needs no device is done and it waits for the device shared; it is prepared and waits
for the device to itself."""


def prepares_shared(kind: str, role: str, compile_mode: str = "default") -> bool:
    """Whether a job prepares with the device shared and holds it alone only for its timed part:
    time jobs. Their trusted set-up (problem, reference, CUDA, torch.compile's compile) held the
    device alone before: on the H200 a new problem's two baselines held it ~22 s
    (docs/benchmarks.md, P2), a candidate's time job 0.4-1.6 s of its ~4.4 s (runs 43-44). No
    candidate code runs in such a process until it holds the device alone: a candidate's time
    job imports the candidate only then (timing.py), so while it waits between its two holds its
    process runs trusted code only, as a reference's does. Not an autotuning compile: it times
    its choices on the device, which must then be its own."""
    autotunes = role in COMPILED_ROLES and "autotune" in compile_mode
    return kind == "time" and not autotunes


def _sandbox(scratch: Path, *, timeout_s: float, gpu: bool, memory_mb: int | None,
             max_output_bytes: int | None, readonly: Sequence[Path],
             writable: Sequence[Path], cpus: Sequence[int] | None = None, nice: int = 0) -> dict:
    """The limits, mounts and cores of a worker, however it is started (arguments of
    start_child)."""
    return {"cwd": scratch, "cpu_time_s": timeout_s * 4 + 10, "memory_mb": memory_mb,
            "max_output_bytes": max_output_bytes, "gpu": gpu, "readonly": readonly,
            "writable": [scratch, *writable], "cpus": cpus, "nice": nice}


def run_job(job: WorkerJob, *, env: dict[str, str], timeout_s: float, gpu: bool,
            memory_mb: int | None, max_output_bytes: int | None = RUN_FILE_BYTES,
            readonly: Sequence[Path] = (), writable: Sequence[Path] = (),
            cpus: Sequence[int] | None = None, nice: int = 0) -> JobRun:
    """Hand the job to the worker in the sandbox, and read back a report it can trust.

    The report is accepted only from a child that exited 0, through its private channel, after
    the worker's hello, alone, and consistent with the job (feedback/worker/channel.py); anything
    else becomes a report written here, so a crash, hang or forged result is a value, never an
    exception.
    """
    scratch = Path(job.scratch_dir)
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as job_file, tempfile.TemporaryFile() as report_file:
        job_file.write(job.model_dump_json().encode())
        job_file.seek(0)
        fd = os.open(f"/proc/self/fd/{report_file.fileno()}", os.O_RDONLY)  # the child's is read-only
        try:
            outcome = run_child(_worker_argv(fd), env=env, timeout_s=timeout_s, stdin=job_file,
                                pass_fds=(fd,), **_sandbox(
                                    scratch, timeout_s=timeout_s, gpu=gpu, memory_mb=memory_mb,
                                    max_output_bytes=max_output_bytes, readonly=readonly,
                                    writable=writable, cpus=cpus, nice=nice))
        finally:
            os.close(fd)
        return _judge(job, outcome, report_file, timeout_s, memory_mb)


def _judge(job: WorkerJob, outcome: ChildOutcome, report_file, timeout_s: float,
           memory_mb: int | None) -> JobRun:
    """The child's report from its channel if it can be trusted, else one written here."""
    from feedback.worker import channel

    report_file.seek(0)
    text = report_file.read(channel.MAX_CHANNEL_BYTES + 1).decode("utf-8", errors="replace")
    report, why = channel.accept(text, job) if len(text) <= channel.MAX_CHANNEL_BYTES \
        else (None, "the channel holds more than a report")
    if report is not None and outcome.ok:
        return JobRun(report=report.model_copy(update={"nonce": job.nonce}), outcome=outcome,
                      trusted=True)
    return JobRun(report=_failure_report(job, outcome, timeout_s, memory_mb, report is not None, why),
                  outcome=outcome, trusted=False)


@dataclass(frozen=True)
class _Spec:
    """Everything a worker's process is started with except its scratch directory: two jobs
    with equal specs can use each other's standby worker."""

    gpu_index: int | None
    extensions_dir: Path
    arch: str | None
    threads: int
    extra_env: tuple[tuple[str, str], ...]
    timeout_s: float
    memory_mb: int | None
    max_output_bytes: int | None
    readonly: tuple[Path, ...]
    writable: tuple[Path, ...]
    cpus: tuple[int, ...] | None = None
    nice: int = 0

    def env(self, scratch: Path) -> dict[str, str]:
        return child_env(scratch=scratch, extensions_dir=self.extensions_dir,
                         gpu_index=self.gpu_index, arch=self.arch, threads=self.threads,
                         extra=dict(self.extra_env))


READY_S = 60.0
"""How long a job waits for its standby worker's imports before it asks for the device anyway."""


class _Standby:
    """A worker started before its job: it imports torch and the worker's modules, says so on its
    signal pipe, then blocks reading its job from stdin. Used once, for one job, like any worker.
    The go pipe serves `prepares_shared` jobs (feedback/worker/handoff.py), and before the job
    `make_context`."""

    def __init__(self, spec: _Spec) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="kr-standby-"))
        self.report_file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by discard()
        self.fd = os.open(f"/proc/self/fd/{self.report_file.fileno()}", os.O_RDONLY)
        self.signal_fd, signal_w = os.pipe()
        go_r, self.go_fd = os.pipe()
        self.ready = self.context = False
        self.child: Started | ChildOutcome = start_child(
            _worker_argv(self.fd, (signal_w, go_r)), env=spec.env(self.scratch),
            stdin=subprocess.PIPE, pass_fds=(self.fd, signal_w, go_r), **_sandbox(
                self.scratch, timeout_s=spec.timeout_s, gpu=spec.gpu_index is not None,
                memory_mb=spec.memory_mb, max_output_bytes=spec.max_output_bytes,
                readonly=spec.readonly, writable=spec.writable, cpus=spec.cpus, nice=spec.nice))
        for fd in (self.fd, signal_w, go_r):
            os.close(fd)

    def usable(self) -> bool:
        return isinstance(self.child, Started) and self.child.alive()

    def _signal(self, limit_s: float, memory_mb: int | None = None, late: bytes = b"") -> bytes:
        """The worker's next byte on its signal pipe, passing over those in `late` (a READY or
        CONTEXT that came after its wait ended); b"" when it ended, went over `memory_mb` or after
        `limit_s`."""
        end = time.monotonic() + limit_s
        while self.usable() and not over_memory(self.child, memory_mb):
            left = end - time.monotonic()
            if left <= 0:
                return b""
            if readable(self.signal_fd, min(left, POLL_S)):
                try:
                    word = os.read(self.signal_fd, 1)
                except OSError:
                    return b""
                if not (word and word in late):
                    return word
        return b""

    def wait_ready(self, limit_s: float = READY_S) -> None:
        """Until the worker's imports are done (or it ended, or `limit_s`): a job asks for the
        device only then, so the device is not held while torch imports (~4 s on a busy 16-core
        host; on the H200, 86 correctness jobs held the device 6 s each for 1.7 s of work)."""
        if not self.ready:
            self.ready = self._signal(limit_s) == READY

    def make_context(self, limit_s: float = READY_S) -> None:
        """Have a ready GPU worker make its CUDA context now, before its job asks for the device,
        and wait until it has (or it ended, or `limit_s`): made inside the job it held the device
        0.72 s of each correctness job and 1.25 s of each candidate time job (H100, a host busy
        with builds, `make gpu-check` of 3160417). Only a worker that serves a job makes one, so
        workers kept waiting hold no device memory. Nothing runs on the device meanwhile, as in a
        baseline's torch.compile build (worker/precompile.py), also made before its hold."""
        if self.ready and not self.context:
            with contextlib.suppress(OSError):
                os.write(self.go_fd, CONTEXT)
            self.context = self._signal(limit_s) == CONTEXT

    def run(self, job: WorkerJob, spec: _Spec) -> JobRun:
        """Deliver the job and wait for the worker; its time limit counts from now."""
        return self._finish(job, spec, self._deliver(job))

    def run_prepared_shared(self, job: WorkerJob, spec: _Spec, lock: Path,
                            alone: bool = False) -> JobRun:
        """A `prepares_shared` job: delivered without `lock`; from the worker's word that its
        set-up that needs no device is done (torch.compile's imports: 3-4 s) it holds the lock
        shared, from its word that it is prepared alone, to its end. The waits for the lock do not
        count against the job's time limit (the worker does nothing meanwhile). `alone`: the lock
        held alone from before delivery to the end, each word answered at once."""
        def hold(shared: bool):
            return contextlib.nullcontext() if alone else locked(lock, shared=shared)
        with locked(lock) if alone else contextlib.nullcontext():
            since = self._deliver(job)
            if self._signal(spec.timeout_s, spec.memory_mb, READY + CONTEXT) != SHARED:
                return self._finish(job, spec, since)  # it ended or ran out of time: its outcome says
            asked = time.monotonic()
            with hold(True):
                since = self._go(since, asked)
                prepared = self._signal(spec.timeout_s - (time.monotonic() - since),
                                        spec.memory_mb) == PREPARED
            if not prepared:
                return self._finish(job, spec, since)
            asked = time.monotonic()
            with hold(False):
                since = self._go(since, asked)
                return self._finish(job, spec, since)

    def _go(self, since: float, asked: float) -> float:
        """Tell the worker to go on, now that the lock asked for at `asked` is held; `since` moved
        on by that wait."""
        with contextlib.suppress(OSError):
            os.write(self.go_fd, b"1")
        return since + time.monotonic() - asked

    def _deliver(self, job: WorkerJob) -> float:
        assert isinstance(self.child, Started)
        since = time.monotonic()
        with contextlib.suppress(OSError):  # a worker that died meanwhile: its outcome says how
            self.child.proc.stdin.write(job.model_dump_json().encode())
        with contextlib.suppress(OSError):
            self.child.proc.stdin.close()
        return since

    def _finish(self, job: WorkerJob, spec: _Spec, since: float) -> JobRun:
        outcome = wait_child(self.child, timeout_s=spec.timeout_s, memory_mb=spec.memory_mb,
                             since=since)
        return _judge(job, outcome, self.report_file, spec.timeout_s, spec.memory_mb)

    def discard(self) -> None:
        if isinstance(self.child, Started):
            self.child.kill()
        for fd in (self.signal_fd, self.go_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.report_file.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


MAX_WAITING = 8
"""Waiting workers kept at most: specs differ per candidate (its extensions folder), so in a long
batch each candidate would otherwise leave one idle worker (torch imported) until the end."""


class _StandbyPool:
    """At most one waiting worker per spec, started when the previous one is taken, so the next
    job's process start and imports overlap the current job instead of holding the device; the
    `MAX_WAITING` most recent ones are kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.cpu = False
        self.waiting: dict[_Spec, _Standby] = {}
        self.served = 0
        self.unfinished: Counter[Path] = Counter()

    def take(self, spec: _Spec, again: bool = True) -> _Standby | None:
        """The waiting worker for `spec` (None the first time), a new one started in its place
        when a job of `spec` may come: `again` (the same candidate's next job), or another
        unfinished candidate of the batch shares the extensions folder (`unfinished`)."""
        with self.lock:
            if not self.users or (spec.gpu_index is None and not self.cpu):
                return None
            worker = self.waiting.pop(spec, None)
            if again or self.unfinished[spec.extensions_dir] > 1:
                self.waiting[spec] = _Standby(spec)
            stale = [self.waiting.pop(k) for k in list(self.waiting)[:-MAX_WAITING]]
        for old in stale:
            old.discard()
        if worker is not None and not worker.usable():
            worker.discard()
            return None
        if worker is not None:
            with self.lock:
                self.served += 1
        return worker

    def close(self) -> None:
        with self.lock:
            waiting, self.waiting = list(self.waiting.values()), {}
            self.unfinished.clear()
        for worker in waiting:
            worker.discard()


_POOL = _StandbyPool()


def standby_served() -> int:
    """How many jobs a standby worker has served in this process (for benchmarks and tests)."""
    return _POOL.served


@contextlib.contextmanager
def standby_workers(cpu: bool = False) -> Iterator[None]:
    """Within this block, each device job's worker process is started while the job before it
    runs (one waiting worker per kind of job), and only then handed its job: process start and
    the import of torch (~2 s) leave the device's critical path. Each worker still serves exactly
    one job. GPU jobs only, unless `cpu` (a waiting worker's imports would share the CPU with a
    cpp timing run). Waiting workers are ended when the outermost block exits."""
    with _POOL.lock:
        _POOL.users += 1
        _POOL.cpu = _POOL.cpu or cpu
    try:
        yield
    finally:
        with _POOL.lock:
            _POOL.users -= 1
            last = _POOL.users == 0
            if last:
                _POOL.cpu = False
        if last:
            _POOL.close()


def standby_unfinished(extensions_dir: Path, change: int) -> None:
    """Count a batch's candidate in (`change` 1) or out (-1, once it has its result) of the
    unfinished candidates whose extensions folder is `extensions_dir`: after a candidate's last
    job a worker is started ahead for its spec only while another of them is unfinished (two
    candidates whose extension sources are the same, differing in Python only, share a spec)."""
    with _POOL.lock:
        _POOL.unfinished[Path(extensions_dir)] += change


def _more_after(kind: str, role: str, options: EvalOptions) -> bool:
    """Whether the same candidate runs another job of this spec after this one: its correctness
    job, time job (`options.time`) and profile job (`options.profile`), in this order, are all
    of them. A worker started ahead after the last one served nothing unless another candidate
    shares the spec, and cost its imports: 42 such in a framework arm of 41 candidates, 4.8 CPU s
    each on a 16-core host whose CPUs were all busy (H100, run 83)."""
    last = "profile" if options.profile else "time" if options.time else "correct"
    return not (role == "candidate" and kind == last)


def launch(kind: str, problem: Problem, backend: Backend, options: EvalOptions, *,
           role: str = "candidate", candidate: Path | None, extensions_dir: Path,
           arch: str | None, gpu_index: int | None, timeout_s: float,
           max_output_bytes: int | None = RUN_FILE_BYTES, writable: Sequence[Path] = (),
           device_lock: Path | None = None, alone: bool = False) -> JobRun:
    """Run one job in a fresh scratch directory (removed afterwards), with the child environment
    and mounts of feedback/README.md. `device_lock` serialises jobs on one device across threads
    and processes: a time or profile job holds it alone (a reference's time job only from its
    timed part on: `prepares_shared`), correctness jobs hold it shared; `alone` (a job run again
    after it ran short of memory beside others): the device alone from the job's start, a time
    job's set-up included. A GPU child sees only GPU
    `gpu_index`, as `cuda:0`. With
    `options.isolate_cores` every child runs off the devices' timing cores (builds also at a lower
    priority) and a time job is told its device's cores (feedback/cores.py)."""
    gpu = gpu_index is not None
    extra = inductor_env(kind, role, options.cache_dir)
    compiled = bytecode.folder()  # read-only to every job, like the cache
    if compiled is not None:
        extra["PYTHONPYCACHEPREFIX"] = str(compiled)
    if compiles_reference(kind, role):  # the one job that may write Inductor's shared cache
        writable = (*writable, Path(options.cache_dir).resolve() / "inductor")
    # builds see no GPU (gpu_index None) but must keep off every GPU's timing core all the same
    place = cores.plan(None if backend == "cpp" else (gpu_index or 0), options.cpu_threads) \
        if options.isolate_cores else None
    spec = _Spec(gpu_index=gpu_index, extensions_dir=Path(extensions_dir), arch=arch,
                 threads=options.cpu_threads, extra_env=tuple(sorted(extra.items())),
                 timeout_s=timeout_s, memory_mb=options.memory_limit_mb,
                 max_output_bytes=max_output_bytes,
                 readonly=(REPO_ROOT, Path(options.cache_dir).resolve(),
                           *([compiled] if compiled else [])),
                 writable=(Path(extensions_dir), *map(Path, writable)),
                 cpus=place.others if place else None,
                 nice=cores.BUILD_NICE if kind == "build" and place else 0)
    if compiled is not None:
        bytecode.warm(compiled, spec.cpus)
    standby = _POOL.take(spec, _more_after(kind, role, options)) if kind != "build" else None
    if standby is None and gpu and kind != "build" and device_lock is not None:
        # started, and its imports done, before the device is asked for: its process start and
        # imports (~4 s on a busy 16-core host, H200 2026-12-01) never hold the device
        standby = _Standby(spec)
        if not standby.usable():
            standby.discard()
            standby = None
    scratch = standby.scratch if standby else Path(tempfile.mkdtemp(prefix=f"kr-{kind}-"))
    try:
        job = WorkerJob(kind=kind, role=role, problem=problem, backend=backend,
                        options=options.model_copy(update={"device": "cuda:0"}) if gpu else options,
                        candidate_path=str(candidate) if candidate else None,
                        extensions_dir=str(extensions_dir), scratch_dir=str(scratch),
                        result_path=str(scratch / "result.json"),
                        nonce=digest(secrets.token_hex(16), kind, role)[:32],
                        cores=list(place.device) if place and kind == "time" else None,
                        alone=alone)
        # timing and profiling have the device to themselves; correctness jobs may share it
        # with each other (their verdicts do not depend on time), never with a timing
        shared = kind == "correct" and not alone
        if standby is not None:
            standby.wait_ready()
            if gpu:
                standby.make_context()
            if device_lock is not None and prepares_shared(kind, role, options.compile_mode):
                return standby.run_prepared_shared(job, spec, device_lock, alone)
        with locked(device_lock, shared) if device_lock else contextlib.nullcontext():
            if standby is not None:
                return standby.run(job, spec)
            return run_job(job, env=spec.env(scratch), timeout_s=timeout_s, gpu=gpu,
                           memory_mb=options.memory_limit_mb, max_output_bytes=max_output_bytes,
                           readonly=list(spec.readonly), writable=list(spec.writable),
                           cpus=spec.cpus, nice=spec.nice)
    finally:
        if standby is not None:
            standby.discard()
        shutil.rmtree(scratch, ignore_errors=True)


def _failure_report(job: WorkerJob, outcome: ChildOutcome, timeout_s: float,
                    memory_mb: int | None, had_report: bool, why: str = "") -> WorkerReport:
    """The report the parent writes for a child that did not deliver a trustworthy one."""
    what = {"build": "the build", "correct": "the correctness run", "time": "the timing run",
            "profile": "the profiling run"}.get(job.kind, f"the {job.kind} job")
    if outcome.timed_out:
        status, text = Status.timeout, f"{what} {outcome.describe(timeout_s)}"
    elif (outcome.returncode == DEVICE_WAIT_EXIT and job.kind != "build"
          and DEVICE_WAIT_SAID in outcome.stderr_tail):
        status, text = Status.timeout, f"{what} timed out waiting for the device"
    elif outcome.ok:
        status = Status.runtime_error
        text = (f"forged or missing result: {what} exited with status 0 without a valid report "
                f"({why + '; ' if why else ''}did the candidate exit early or write its own result?)")
    else:
        status = Status.runtime_error
        text = f"{what} {outcome.describe(timeout_s, memory_mb)}"
        if had_report:
            text += " after writing its report (results of a crashing process are not trusted)"
    tail = _drop_logging(outcome.stderr_tail) or _drop_logging(outcome.stdout_tail)
    if tail:
        text += f"\n{tail}"
    return WorkerReport(nonce=job.nonce, status=status, message=text, seconds=outcome.wall_s)


def _drop_logging(text: str) -> str:
    """The output without torch's own glog-style info/warning lines (`W1129 13:46:30.59 ...`)."""
    return "\n".join(ln for ln in text.splitlines() if not re.match(r"[IW]\d{4} \d\d:", ln)).strip()
