"""The only place in the project that starts processes.

Candidates are untrusted code: they may hang, crash, flood output, eat memory or start processes
of their own. `run_child` turns every such behaviour into a `ChildOutcome` value, so the parent
never dies and never waits forever. What is enforced where is written down in feedback/README.md.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ConfigDict, Field

TAIL_BYTES = 64 * 1024
SIGNAL_MEANING = {
    "SIGSEGV": " (segmentation fault: an invalid memory access in native code)",
    "SIGBUS": " (bus error: a misaligned or unmapped memory access)",
    "SIGFPE": " (arithmetic fault, e.g. an integer division by zero)",
    "SIGILL": " (illegal instruction)", "SIGABRT": " (aborted, e.g. a failed assertion)",
    "SIGXCPU": " (CPU-time limit)", "SIGXFSZ": " (file/output size limit)",
    "SIGKILL": " (killed, possibly by the kernel for lack of memory)",
}
POLL_S = 0.1
# Capabilities dropped from the child (root in CI): no remounting, no module loading, no ptrace
# of the evaluator, no raw network access.
DROPPED_CAPS = "-sys_admin,-sys_module,-sys_ptrace,-sys_boot,-net_admin,-net_raw,-sys_time"


class ChildOutcome(BaseModel):
    """How a child ended. Exactly one of `returncode >= 0`, `signal`, `timed_out` tells it."""

    model_config = ConfigDict(frozen=True)

    returncode: int | None = Field(description="Exit status; None when killed by a signal.")
    signal: str | None = Field(default=None, description="Name of the killing signal (`SIGSEGV`).")
    timed_out: bool = Field(default=False, description="Killed by the parent at `timeout_s`.")
    memory_exceeded: bool = Field(default=False, description="Killed by the parent: resident "
                                  "memory of the process tree passed `memory_mb`.")
    stdout_tail: str = Field(default="", description="Last bytes of stdout (bounded).")
    stderr_tail: str = Field(default="", description="Last bytes of stderr (bounded).")
    wall_s: float = Field(description="Wall time from start to the end of the child.")
    isolation: list[str] = Field(default_factory=list,
                                 description="Isolation layers that applied (`net`, `mounts`, `caps`).")
    cpu_s: float | None = Field(default=None, description="CPU seconds (user and system) of the "
                                "child and of the descendants it waited for; None where unknown.")

    @property
    def ok(self) -> bool:
        """Exited normally with status 0."""
        return self.returncode == 0 and not self.timed_out and not self.memory_exceeded

    def describe(self, timeout_s: float | None = None, memory_mb: int | None = None) -> str:
        """What happened, as the predicate of a sentence a person (or a model) can act on."""
        if self.timed_out:
            return f"timed out after {timeout_s or self.wall_s:.0f} s (its processes were killed)"
        if self.memory_exceeded:
            return f"exceeded the memory limit ({memory_mb} MB resident) and was killed"
        if self.signal:
            return f"was killed by signal {self.signal}{SIGNAL_MEANING.get(self.signal, '')}"
        return f"exited with status {self.returncode}"


# Applies resource limits, then execs the real argv. A launcher process instead of `preexec_fn`,
# which may deadlock when the parent has threads (evaluate_many runs children from threads).
# It also places the child: CPU cores (`cpus`, inherited by every thread and process it starts)
# and a lower priority (`nice`), so builds stay off the cores of a device's timing worker.
_LAUNCHER = """
import json, os, resource, sys
spec = json.loads(sys.argv[1])
for name, value in spec["limits"].items():
    resource.setrlimit(getattr(resource, name), tuple(value))
if spec["cpus"]:
    os.sched_setaffinity(0, spec["cpus"])
if spec["nice"]:
    os.nice(spec["nice"])
os.execvp(sys.argv[2], sys.argv[2:])
"""


def _limits(cpu_time_s: float | None, memory_mb: int | None, max_output_bytes: int | None,
            gpu: bool, nofile: int) -> dict[str, tuple[int, int]]:
    """Resource limits for the child, by `resource` constant name."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nofile = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
    limits = {"RLIMIT_CORE": (0, 0), "RLIMIT_NOFILE": (nofile, nofile)}
    if cpu_time_s is not None:
        soft = max(1, int(cpu_time_s))
        limits["RLIMIT_CPU"] = (soft, soft + 5)
    if max_output_bytes is not None:
        limits["RLIMIT_FSIZE"] = (max_output_bytes, max_output_bytes)
    if memory_mb is not None and not gpu:
        # CUDA reserves huge virtual ranges, so the address-space limit is CPU-only; on the GPU
        # path the parent polls resident memory instead (see _tree_rss_mb).
        limits["RLIMIT_AS"] = (memory_mb * 1024 * 1024,) * 2
    return limits


@functools.cache
def _probe(argv: tuple[str, ...]) -> bool:
    try:
        return subprocess.run(argv, check=False, capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def isolation_available() -> list[str]:
    """Which isolation layers this machine grants: `net` (+ `mounts`, `caps`) or nothing."""
    unshare, setpriv, sh = shutil.which("unshare"), shutil.which("setpriv"), shutil.which("sh")
    if not (unshare and sh):
        return []
    full = setpriv and _probe((unshare, "-m", "-n", "--", setpriv,
                               f"--bounding-set={DROPPED_CAPS}", "--", sh, "-c", "true"))
    if full:
        return ["net", "mounts", "caps"]
    return ["net"] if _probe((unshare, "-n", "--", sh, "-c", "true")) else []


def _wrap(argv: Sequence[str], readonly: Sequence[Path], writable: Sequence[Path],
          layers: list[str]) -> list[str]:
    """Prefix argv with a new network (and mount) namespace, read-only binds and fewer caps."""
    if not layers:
        return list(argv)
    if "mounts" not in layers:
        return ["unshare", "-n", "--", *argv]
    steps = []
    for p in readonly:
        q = shlex.quote(str(p))
        steps.append(f"mount --bind {q} {q} && mount -o remount,bind,ro {q} {q}")
    for p in writable:
        q = shlex.quote(str(p))
        steps.append(f"mount --bind {q} {q} && mount -o remount,bind,rw {q} {q}")
    script = "".join(f"{s} 2>/dev/null; " for s in steps)
    script += f'exec setpriv --bounding-set={DROPPED_CAPS} -- "$@"'
    return ["unshare", "-m", "-n", "--", "sh", "-c", script, "sh", *argv]


def process_table() -> Iterator[tuple[int, list[str]]]:
    """Every process /proc shows now: (pid, the fields of its `stat` after the name: state ppid
    pgrp session ...)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            yield int(entry.name), stat[stat.rindex(")") + 2:].split()
        except (OSError, ValueError):
            continue


def descendants(pid: int) -> list[int]:
    """Every process started by `pid`, its children's children included (they may each run in
    a session of their own, as evaluator workers do), as /proc shows them now."""
    children: dict[int, list[int]] = {}
    for child, fields in process_table():
        children.setdefault(int(fields[1]), []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(pid: int | None = None) -> int:
    """SIGKILL every process that `pid` (default: this one) started and that still runs, each
    child's session included: for a caller that abandons work its threads started (a build load
    whose builds in flight are no result). How many there were."""
    return kill(descendants(os.getpid() if pid is None else pid))


def kill(pids: Sequence[int]) -> int:
    """SIGKILL each of `pids`; how many were still there to kill."""
    killed = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed


def _sessions() -> dict[int, list[int]]:
    """Every session's running processes (zombies, dead and waiting to be reaped, left out), as
    /proc shows them now."""
    table: dict[int, list[int]] = {}
    for pid, fields in process_table():
        if len(fields) > 3 and fields[0] not in ("Z", "X"):
            table.setdefault(int(fields[3]), []).append(pid)
    return table


def _tree_rss_mb(pids: Sequence[int]) -> float:
    total_kb = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total_kb / 1024


KILL_WAIT_S = 5.0


def _kill_tree(sid: int) -> None:
    """Kill the child's process group, then every process left in its session, and wait (up to
    KILL_WAIT_S) until none of them runs: a killed process takes a moment to die, and the caller
    may rely on nothing of the child running once this returns."""
    try:
        os.killpg(sid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + KILL_WAIT_S
    while pids := _sessions().get(sid, []):
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last `limit` bytes of a file, decoded leniently; never reads the whole file."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            data = fh.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return (f"[... {size - limit} earlier bytes dropped ...]\n" + text) if size > limit else text


def run_child(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
              cpu_time_s: float | None = None, memory_mb: int | None = None,
              max_output_bytes: int | None = 64 * 1024 * 1024, gpu: bool = False,
              readonly: Sequence[Path] = (), writable: Sequence[Path] = (),
              isolate: bool = True, nofile: int = 4096, tail_bytes: int = TAIL_BYTES,
              stdin: IO[bytes] | None = None, pass_fds: Sequence[int] = (),
              cpus: Sequence[int] | None = None, nice: int = 0) -> ChildOutcome:
    """Run argv in a new session under limits and return how it ended; never raises for the child.

    Args:
        argv: program and arguments.
        cwd: working directory (the scratch directory); stdout/stderr files are written there.
        env: the child's whole environment (nothing is inherited: no API keys leak).
        timeout_s: wall-clock limit; the whole process tree is killed when it passes.
        cpu_time_s: RLIMIT_CPU per process (SIGXCPU).
        memory_mb: RLIMIT_AS when not `gpu`; in all cases the parent also kills the tree when its
            summed resident memory passes it.
        max_output_bytes: RLIMIT_FSIZE: largest file the child may write (stdout included).
        gpu: the child uses CUDA (no address-space limit).
        readonly / writable: paths bound read-only, then holes bound writable (mount namespace).
        isolate: use the namespaces and capability drop that this machine allows.
        nofile: RLIMIT_NOFILE.
        tail_bytes: how much of stdout/stderr is read back.
        stdin: the child's standard input (default /dev/null); the job travels this way.
        pass_fds: descriptors the child inherits (the worker's report channel).
        cpus: CPU cores the child (and all it starts) may run on; None = those of this process.
        nice: added to the child's nice value (a build's lower priority).
    """
    child = start_child(argv, cwd=cwd, env=env, cpu_time_s=cpu_time_s, memory_mb=memory_mb,
                        max_output_bytes=max_output_bytes, gpu=gpu, readonly=readonly,
                        writable=writable, isolate=isolate, nofile=nofile, stdin=stdin,
                        pass_fds=pass_fds, cpus=cpus, nice=nice)
    if isinstance(child, ChildOutcome):
        return child
    return wait_child(child, timeout_s=timeout_s, memory_mb=memory_mb, tail_bytes=tail_bytes)


class Started:
    """A child started by `start_child`, not yet waited for (see `wait_child`)."""

    def __init__(self, proc: subprocess.Popen, cwd: Path, layers: list[str]) -> None:
        self.proc, self.cwd, self.layers = proc, cwd, layers
        self.started = time.monotonic()
        self.cpu_s: float | None = None

    def poll(self, block: bool = False) -> int | None:
        """The child's exit status (Popen's `returncode`) once it has ended, None before; the
        child is reaped here with `os.wait4`, which also says its CPU time (`cpu_s`). `block`:
        wait for its end."""
        proc = self.proc
        if proc.returncode is None:
            try:
                pid, status, usage = os.wait4(proc.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: Popen's answer, without a CPU time
                return proc.wait() if block else proc.poll()
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                self.cpu_s = round(usage.ru_utime + usage.ru_stime, 3)
        return proc.returncode

    def alive(self) -> bool:
        return self.poll() is None

    def kill(self) -> None:
        """End the child and everything it started (for a child never waited for)."""
        _kill_tree(self.proc.pid)
        self.poll(block=True)


def start_child(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str],
                cpu_time_s: float | None = None, memory_mb: int | None = None,
                max_output_bytes: int | None = 64 * 1024 * 1024, gpu: bool = False,
                readonly: Sequence[Path] = (), writable: Sequence[Path] = (),
                isolate: bool = True, nofile: int = 4096, stdin: IO[bytes] | int | None = None,
                pass_fds: Sequence[int] = (), cpus: Sequence[int] | None = None,
                nice: int = 0) -> Started | ChildOutcome:
    """Start argv in a new session under limits (arguments as for `run_child`; `stdin` may be
    `subprocess.PIPE`); a ChildOutcome when it cannot start at all."""
    cwd = Path(cwd)
    cwd.mkdir(parents=True, exist_ok=True)
    layers = isolation_available() if isolate else []
    limits = _limits(cpu_time_s, memory_mb, max_output_bytes, gpu, nofile)
    spec = {"limits": limits, "cpus": sorted(cpus) if cpus else None, "nice": nice}
    full_argv = [sys.executable, "-I", "-c", _LAUNCHER, json.dumps(spec),
                 *_wrap(argv, [Path(p) for p in readonly], [Path(p) for p in writable], layers)]
    with (cwd / "stdout.txt").open("wb") as out, (cwd / "stderr.txt").open("wb") as err:
        try:
            proc = subprocess.Popen(full_argv, cwd=cwd, env=dict(env),
                                    stdin=subprocess.DEVNULL if stdin is None else stdin,
                                    stdout=out, stderr=err, start_new_session=True, close_fds=True,
                                    pass_fds=tuple(pass_fds))
        except OSError as exc:
            return ChildOutcome(returncode=127, stderr_tail=f"could not start {argv[0]}: {exc}",
                                wall_s=0.0)
    return Started(proc, cwd, layers)


def over_memory(child: Started, memory_mb: int | None) -> bool:
    """Whether the child's session holds more resident memory than `memory_mb` now (the check
    `wait_child` makes every POLL_S), for a parent that waits on something else meanwhile. Which
    processes are in the session comes from `_recent_sessions`; their memory is read now."""
    return memory_mb is not None and _tree_rss_mb(
        _recent_sessions().get(child.proc.pid, [child.proc.pid])) > memory_mb


_SESSIONS: tuple[float, dict[int, list[int]]] = (float("-inf"), {})
_SESSIONS_LOCK = threading.Lock()


def _recent_sessions() -> dict[int, list[int]]:
    """`_sessions` at most POLL_S / 2 old: one scan of /proc for all of this process's threads.
    When each waiting thread scanned /proc itself every POLL_S (a batch waits on 16-20 children
    at once: builds, device jobs, workers started ahead, among ~250 processes), the scans held
    the parent's interpreter lock so much that a job's exit was seen 0.57-0.66 s late, inside
    its hold of the device (H100, run 78; 0.19 s with this and `_exited`'s pidfd, run 79)."""
    global _SESSIONS
    with _SESSIONS_LOCK:
        taken, table = _SESSIONS
        if time.monotonic() - taken > POLL_S / 2:
            table = _sessions()
            _SESSIONS = (time.monotonic(), table)
        return table


def readable(fd: int, timeout_s: float) -> bool:
    """Whether `fd` has something to read (or its other end closed) within `timeout_s`: poll,
    not select, which refuses a descriptor past 1023, and a busy parent may hold that many."""
    waiter = select.poll()
    waiter.register(fd, select.POLLIN)
    return bool(waiter.poll(max(timeout_s, 0.0) * 1000))


def _exited(proc: subprocess.Popen, timeout_s: float, pidfd: int | None) -> None:
    """Wait up to `timeout_s` for `proc` to end: on its pidfd (woken the moment it exits), else
    Popen's polling wait."""
    if pidfd is not None:
        readable(pidfd, timeout_s)
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout_s)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` ends (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def wait_child(child: Started, *, timeout_s: float, memory_mb: int | None = None,
               tail_bytes: int = TAIL_BYTES, since: float | None = None) -> ChildOutcome:
    """Wait for a started child under the wall-clock and resident-memory limits, counted from
    `since` (a `time.monotonic()` value; default: its start), kill what is left of its session,
    and say how it ended."""
    proc, sid = child.proc, child.proc.pid
    start = child.started if since is None else since
    timed_out = memory_exceeded = False
    pidfd = _pidfd(sid)
    try:
        while child.poll() is None:
            if time.monotonic() - start > timeout_s:
                timed_out = True
                break
            if over_memory(child, memory_mb):
                memory_exceeded = True
                break
            _exited(proc, POLL_S, pidfd)
    finally:
        if pidfd is not None:
            os.close(pidfd)
        _kill_tree(sid)  # also reaps grandchildren left behind by a child that exited
        child.poll(block=True)
    wall = time.monotonic() - start
    rc = proc.returncode
    sig = None
    if rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else f"signal {-rc}"
        rc = None
    if timed_out or memory_exceeded:
        rc, sig = None, sig or "SIGKILL"
    return ChildOutcome(returncode=rc, signal=sig, timed_out=timed_out,
                        memory_exceeded=memory_exceeded,
                        stdout_tail=read_tail(child.cwd / "stdout.txt", tail_bytes),
                        stderr_tail=read_tail(child.cwd / "stderr.txt", tail_bytes), wall_s=wall,
                        isolation=child.layers, cpu_s=child.cpu_s)
