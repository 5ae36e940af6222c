"""Where a machine's CPU seconds go during a throughput arm, by kind of process.

The throughput bench starts this sampler as a process of its own (`python -m
experiments.bench.cpuload FILE`; its /proc scans would otherwise hold the bench parent's
interpreter lock, which every job's thread needs) and stops it with SIGTERM. Every INTERVAL_S it
appends one JSON line to FILE: the time, the machine's busy cores (/proc/stat, exact) and the busy
cores of each kind of process (the CPU ticks each running process gained since the last scan).

Kinds (`kind_of`): `build tools` (nvcc's chain, the host compiler, ninja: a candidate's build),
`inductor pool` (torch.compile's compile processes and what they start, Triton's ptxas among
them), `workers` (the evaluator's job processes: imports, CUDA contexts, the jobs' own work),
`bench` (the process that started the sampler: the evaluator's parent) and `other`. A process that
starts and ends between two scans is not seen; what the kinds miss of the machine's total is
reported as `unattributed`. The workers' seconds are also split by thread (`worker_threads`):
each worker's main thread, and its other threads by name (digits as `#`), where a thread pool
spinning while it waits for work, or a driver's threads, would show.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

INTERVAL_S = 0.5
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
KINDS = ("build tools", "inductor pool", "workers", "bench", "other")
BUILD_TOOLS = frozenset({"nvcc", "cicc", "cudafe++", "ptxas", "fatbinary", "nvlink", "cc1plus",
                         "cc1", "gcc", "g++", "c++", "cc", "as", "ld", "collect2", "ninja"})


def machine_ticks(text: str) -> tuple[int, int]:
    """(busy, all) CPU ticks since boot from /proc/stat's first line; idle and iowait are not busy."""
    fields = [int(v) for v in text.split("\n", 1)[0].split()[1:9]]
    return sum(fields) - fields[3] - fields[4], sum(fields)


def parse_stat(text: str) -> tuple[str, int, int, int]:
    """(comm, ppid, utime + stime ticks, start time) of a /proc/PID/stat line; the name may hold
    spaces and parentheses, so the fields are counted from its last ')'."""
    comm = text[text.index("(") + 1:text.rindex(")")]
    rest = text[text.rindex(")") + 2:].split()
    return comm, int(rest[1]), int(rest[11]) + int(rest[12]), int(rest[19])


def kind_of(pid: int, procs: dict[int, tuple[str, int, str]], bench: int) -> str:
    """A process's kind from its name and command line, and its ancestors' (`procs`: pid ->
    (comm, ppid, command line))."""
    comm, _, cmdline = procs[pid]
    seen = 0
    ancestor = pid
    while ancestor in procs and seen < 64:  # a compile worker's tools are the pool's
        if "compile_worker" in procs[ancestor][2]:
            return "inductor pool"
        ancestor, seen = procs[ancestor][1], seen + 1
    if comm in BUILD_TOOLS or comm.startswith(("cc1", "x86_64-linux-gnu-")):
        return "build tools"
    if pid == bench:
        return "bench"
    if "feedback.worker" in cmdline:
        return "workers"
    return "other"


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:  # the process ended between listing and reading
        return None


class Sampler:
    """The per-process tick counts of the last scan, and each scan's busy cores by kind."""

    def __init__(self, bench: int, proc: Path = Path("/proc")) -> None:
        self.bench, self.proc = bench, proc
        self.ticks: dict[tuple[int, int], int] = {}  # (pid, start time) -> ticks
        self.cmdlines: dict[tuple[int, int], str] = {}
        self.last = None
        self.thread_ticks: dict[tuple[int, int, int], int] = {}  # (pid, tid, start) -> ticks

    def scan(self) -> tuple[float, int, dict[int, tuple[str, int, str]], dict[int, int]]:
        """The machine's busy ticks, each process's (comm, ppid, command line) and its ticks
        gained since the last scan (all of its ticks for one not seen before)."""
        busy, _ = machine_ticks(_read(str(self.proc / "stat")) or "cpu 0 0 0 0 0 0 0 0")
        procs, gained, ticks = {}, {}, {}
        for entry in os.scandir(self.proc):
            if not entry.name.isdigit():
                continue
            text = _read(f"{entry.path}/stat")
            if text is None:
                continue
            pid = int(entry.name)
            comm, ppid, used, started = parse_stat(text)
            key = (pid, started)
            if key not in self.cmdlines:
                raw = _read(f"{entry.path}/cmdline") or ""
                self.cmdlines[key] = raw.replace("\0", " ")
            procs[pid] = (comm, ppid, self.cmdlines[key])
            gained[pid] = used - self.ticks.get(key, 0)
            ticks[key] = used
        self.ticks = ticks
        return time.time(), busy, procs, gained

    def threads(self, pids: list[int]) -> dict[str, int]:
        """Ticks the threads of `pids` gained since the last scan, by thread: `main`, or the
        thread's name with digits as `#`."""
        gained: dict[str, int] = {}
        ticks = {}
        for pid in pids:
            try:
                tids = [int(t) for t in os.listdir(self.proc / str(pid) / "task")]
            except OSError:
                continue
            for tid in tids:
                text = _read(f"{self.proc}/{pid}/task/{tid}/stat")
                if text is None:
                    continue
                comm, _, used, started = parse_stat(text)
                key = (pid, tid, started)
                name = "main" if tid == pid else re.sub(r"\d+", "#", comm)
                gained[name] = gained.get(name, 0) + used - self.thread_ticks.get(key, 0)
                ticks[key] = used
        self.thread_ticks = ticks
        return gained

    def row(self) -> dict | None:
        """One scan as a row (busy cores since the last scan), or None for the first scan."""
        now, busy, procs, gained = self.scan()
        kinds = {pid: kind_of(pid, procs, self.bench) for pid in gained}
        threads = self.threads([pid for pid, kind in kinds.items() if kind == "workers"])
        last, self.last = self.last, (now, busy)
        if last is None:
            return None
        span = max(now - last[0], 1e-6)
        by = dict.fromkeys(KINDS, 0)
        for pid, ticks in gained.items():
            by[kinds[pid]] += ticks
        return {"t": round(now, 3), "s": round(span, 3),
                "cores": round((busy - last[1]) * TICK_S / span, 3),
                "by": {k: round(v * TICK_S / span, 3) for k, v in by.items()},
                "worker_threads": {k: round(v * TICK_S / span, 3) for k, v in threads.items()
                                   if v}}


def summary(rows: list[dict], cores: int | None = None) -> dict:
    """CPU seconds by kind and for the whole machine over the sampled rows, the machine's mean
    busy cores, and what the kinds did not see (`unattributed`)."""
    seconds = {k: round(sum(r["by"].get(k, 0) * r["s"] for r in rows), 1) for k in KINDS}
    machine = round(sum(r["cores"] * r["s"] for r in rows), 1)
    span = sum(r["s"] for r in rows)
    threads: dict[str, float] = {}
    for r in rows:
        for name, busy in (r.get("worker_threads") or {}).items():
            threads[name] = threads.get(name, 0.0) + busy * r["s"]
    out = {"span_s": round(span, 1), "machine_cpu_s": machine,
           "mean_busy_cores": round(machine / span, 2) if span else None,
           "cpu_s": seconds, "unattributed_s": round(machine - sum(seconds.values()), 1),
           "worker_threads_s": {k: round(v, 1) for k, v in
                                sorted(threads.items(), key=lambda kv: -kv[1]) if v >= 0.05}}
    if cores:
        out["cores"] = cores
    return out


def describe(cpu: dict) -> str:
    """One line of a summary, for a bench's printout."""
    kinds = ", ".join(f"{k} {v:.0f}" for k, v in cpu["cpu_s"].items())
    threads = ", ".join(f"{k} {v:.0f}" for k, v in list(cpu.get("worker_threads_s", {}).items())[:6])
    return (f"CPU s over {cpu['span_s']:.0f} s: machine {cpu['machine_cpu_s']:.0f} (mean "
            f"{cpu['mean_busy_cores']} busy cores of {cpu.get('cores', '?')}); {kinds}; "
            f"unattributed {cpu['unattributed_s']:.0f}"
            + (f"; workers' threads: {threads}" if threads else ""))


def read(path: Path) -> list[dict]:
    """A sampler's rows; a line cut by the sampler's end is skipped."""
    rows = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def start(path: Path) -> subprocess.Popen:
    """The sampler in a process of its own, appending to `path`."""
    return subprocess.Popen([sys.executable, "-m", "experiments.bench.cpuload", str(path)])


def stop(sampler: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Stop a sampler after its current scan; killed if it does not end within `timeout_s`."""
    sampler.terminate()
    try:
        sampler.wait(timeout_s)
    except subprocess.TimeoutExpired:
        sampler.kill()
        sampler.wait()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m experiments.bench.cpuload FILE (stop it with SIGTERM)",
              file=sys.stderr)
        return 2
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    sampler = Sampler(os.getppid())
    with open(args[0], "a") as out:
        while not stop:
            row = sampler.row()
            if row is not None:
                out.write(json.dumps(row) + "\n")
                out.flush()
            time.sleep(INTERVAL_S)
    return 0


if __name__ == "__main__":
    sys.exit(main())
