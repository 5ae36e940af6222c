"""A pytest plugin that streams each test's outcome as one JSON line, as it happens.

`make gpu-check` loads it (`-p experiments.bench.testlog`) with `KERNEL_REFINE_TESTLOG=FILE`, so
a run killed at its time limit still says which tests passed, which failed and which were still
running. Under pytest-xdist the controller receives every worker's reports, so one file serves.

With `KERNEL_REFINE_JOBLOG=FILE` as well, every evaluator job that a test starts (in whichever
process runs the test) appends one line: its kind and role, the seconds it waited for the device
lock and the seconds it then held it, when it began (Unix time: a timeline of the device), the
seconds it waited for a worker started ahead of it (`standby_s`: `ready`, its imports; `context`,
its CUDA context), the seconds from its worker's report to the parent's reading of it (`exit_s`:
the worker's exit and reaping, inside the hold), the CPU seconds of its process and of those it
waited for (`cpu_s`: a build's compilers among them) and the test: where a GPU suite's time goes
(`jobs`). A worker started ahead that served no job is a row of kind `standby` with its CPU
seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

FAILURE_CHARS = 3000
_WORKER = False


def pytest_configure(config):
    """An xdist worker writes nothing: its reports reach the controller, which writes them."""
    global _WORKER
    _WORKER = hasattr(config, "workerinput")
    if os.environ.get("KERNEL_REFINE_JOBLOG"):
        trace_jobs(os.environ["KERNEL_REFINE_JOBLOG"])


def trace_jobs(path: str) -> Callable[[], None]:
    """Wrap the evaluator's job launch and device lock to log each job's wait and hold. Returns
    what puts the evaluator back as it was (a caller that traces one run and goes on, such as
    the throughput bench's `main` inside a test process, must not leave its log behind)."""
    import feedback.evaluate
    from feedback import job

    saved = [(owner, name, getattr(owner, name)) for owner, name in (
        (job._Standby, "wait_ready"), (job._Standby, "make_context"), (job, "_judge"),
        (job._Standby, "discard"), (job, "launch"), (job, "locked"), (feedback.evaluate, "launch"))]
    here = threading.local()
    launch, locked = job.launch, job.locked

    def traced_wait(name, method):
        """A standby worker's wait (`_Standby.wait_ready`, `make_context`), timed into the row."""
        def wait(self, *args, **kwargs):
            asked = time.monotonic()
            try:
                return method(self, *args, **kwargs)
            finally:
                waits = getattr(here, "standby", None)
                if waits is not None:
                    waits[name] = round(waits.get(name, 0.0) + time.monotonic() - asked, 3)
        return wait

    job._Standby.wait_ready = traced_wait("ready", job._Standby.wait_ready)
    job._Standby.make_context = traced_wait("context", job._Standby.make_context)
    judge = job._judge

    def traced_judge(worker_job, outcome, report_file, *args, **kwargs):
        """From the report's last write (the file's modification time) to now: the worker's
        exit and its reaping, which the device's hold waits for."""
        with contextlib.suppress(OSError):
            info = os.fstat(report_file.fileno())
            if info.st_size:
                here.exit_s = round(max(time.time() - info.st_mtime, 0.0), 3)
        here.cpu_s = outcome.cpu_s
        return judge(worker_job, outcome, report_file, *args, **kwargs)

    job._judge = traced_judge
    discard = job._Standby.discard

    def traced_discard(self):
        """A worker started ahead that served no job: its CPU seconds (imports) as a row."""
        served = not isinstance(self.child, job.Started) or self.child.poll() is not None
        discard(self)
        if not served:
            row = {"kind": "standby", "role": "discarded", "problem": "",
                   "began": round(time.time(), 2), "seconds": 0.0, "wait_s": None,
                   "held_s": None, "holds": [], "standby_s": {}, "exit_s": None,
                   "cpu_s": self.child.cpu_s,
                   "test": os.environ.get("PYTEST_CURRENT_TEST", ""), "phases": {}}
            with open(path, "a") as log:
                log.write(json.dumps(row) + "\n")

    job._Standby.discard = traced_discard

    def traced_launch(kind, problem, *args, role="candidate", **kwargs):
        here.wait, here.held, here.holds, here.standby = None, None, [], {}
        here.exit_s = here.cpu_s = None
        start, began, run = time.monotonic(), time.time(), None
        try:
            run = launch(kind, problem, *args, role=role, **kwargs)
            return run
        finally:
            row = {"kind": kind, "role": role, "problem": problem.id, "began": round(began, 2),
                   "seconds": round(time.monotonic() - start, 2), "wait_s": here.wait,
                   "held_s": here.held, "holds": here.holds, "standby_s": here.standby,
                   "exit_s": here.exit_s, "cpu_s": here.cpu_s,
                   "test": os.environ.get("PYTEST_CURRENT_TEST", ""),
                   "phases": run.report.phases if run is not None else {}}
            with open(path, "a") as log:
                log.write(json.dumps(row) + "\n")

    @contextlib.contextmanager
    def traced_locked(lock_path, shared=False):
        """Summed over a job's holds (a reference's time job holds the lock twice: shared to
        prepare, alone to time)."""
        asked = time.monotonic()
        with locked(lock_path, shared):
            here.wait = round((here.wait or 0.0) + time.monotonic() - asked, 2)
            got, since = time.monotonic(), time.time()
            try:
                yield
            finally:
                here.held = round((here.held or 0.0) + time.monotonic() - got, 2)
                here.holds.append([round(since, 3), round(time.time(), 3), shared])

    job.launch, job.locked = traced_launch, traced_locked
    feedback.evaluate.launch = traced_launch  # it imported launch by name: the wrapper too

    def untrace() -> None:
        for owner, name, value in saved:
            setattr(owner, name, value)
    return untrace


def _holds(rows: list[dict]) -> list[list]:
    """Every hold of the device in job-log rows: [start, end, shared] (a row from before holds
    were logged: its `held_s` taken as ending with the job; shared unknown, None)."""
    return [[*span, None][:3] for row in rows if row.get("held_s") for span in (
        row.get("holds") or [[row["began"] + row["seconds"] - row["held_s"],
                              row["began"] + row["seconds"]]])]


def _union(spans: list[list]) -> list[tuple[float, float]]:
    """The spans merged where they overlap, in order."""
    merged: list[tuple[float, float]] = []
    for lo, hi, *_ in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def busy_seconds(rows: list[dict]) -> float:
    """Seconds in which some job held the device, over job-log rows (their `holds`). Shared holds
    that overlap count once."""
    return round(sum(hi - lo for lo, hi in _union(_holds(rows))), 1)


def device_timeline(rows: list[dict]) -> dict[str, float | None]:
    """Where the device's seconds went over a batch's job log: `span_s` (first job's start to
    last job's end), `busy_s` (some job held it), `alone_s` (a job held it alone; None where the
    log does not say which holds were shared), `shared_only_s` (held, only shared), and its idle
    seconds before the first build ended (`first_build_s`: the device had nothing of a
    candidate's to do) and after (`idle_after_s`)."""
    holds = _holds(rows)
    if not rows or not holds:
        return {}
    start = min(r["began"] for r in rows)
    busy = _union(holds)
    builds = [r["began"] + r["seconds"] for r in rows if r["kind"] == "build"]
    cut = min(builds) if builds else start
    idle_before = (cut - start) - sum(max(0.0, min(hi, cut) - lo) for lo, hi in busy if lo < cut)
    end = max(max(r["began"] + r["seconds"] for r in rows), busy[-1][1])
    idle_after = (end - cut) - sum(hi - max(lo, cut) for lo, hi in busy if hi > cut)
    known = all(h[2] is not None for h in holds)
    alone = sum(hi - lo for lo, hi in _union([h for h in holds if h[2] is False])) if known \
        else None
    total = sum(hi - lo for lo, hi in busy)
    return {"span_s": round(end - start, 1), "busy_s": round(total, 1),
            "alone_s": round(alone, 1) if alone is not None else None,
            "shared_only_s": round(total - alone, 1) if alone is not None else None,
            "shared_by_holders_s": _shared_levels(holds) if known else None,
            "first_build_s": round(cut - start, 1),
            "idle_before_first_build_s": round(idle_before, 1), "idle_after_s": round(idle_after, 1)}


def _shared_levels(holds: list[list]) -> dict[str, float]:
    """Seconds in which the device was held only shared, by how many jobs held it: where one
    correctness job runs by itself while a timing waits to have the device alone, the device
    does one job's work."""
    edges = sorted((t, step, shared) for lo, hi, shared in holds
                   for t, step in ((lo, 1), (hi, -1)))
    levels: dict[str, float] = {}
    count = {True: 0, False: 0}
    last = edges[0][0] if edges else 0.0
    for t, step, shared in edges:
        if count[True] and not count[False]:
            key = str(count[True])
            levels[key] = levels.get(key, 0.0) + t - last
        count[shared] += step
        last = t
    return {k: round(v, 1) for k, v in sorted(levels.items(), key=lambda kv: int(kv[0]))}


def jobs(path) -> dict[str, dict]:
    """`job_stats` of a job-log file ({} when there is none)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return {}
    return job_stats([json.loads(line) for line in lines])


JOB_SECONDS = ("seconds", "wait_s", "held_s", "exit_s", "cpu_s")  # a job row's, summed to 0.1 s


def job_stats(rows: list[dict]) -> dict[str, dict]:
    """Per job kind and role: count, seconds, seconds waiting for the device lock, held (of them
    alone and shared, where the log says), waiting for a worker started ahead (`standby_s`), from
    its report to its reaping (`exit_s`), and the worker's own phases (WorkerReport.phases), summed."""
    out: dict[str, dict] = {}
    for row in rows:
        stats = out.setdefault(f"{row['kind']}/{row['role']}",
                               {"jobs": 0, "seconds": 0.0, "wait_s": 0.0, "held_s": 0.0,
                                "alone_s": 0.0, "shared_s": 0.0, "standby_s": {}, "phases": {}})
        stats["jobs"] += 1
        for key in JOB_SECONDS:
            if key in stats or row.get(key) is not None:  # `exit_s`, `cpu_s`: in newer logs
                stats[key] = stats.get(key, 0.0) + (row.get(key) or 0.0)
        for lo, hi, shared in row.get("holds") or []:
            stats["shared_s" if shared else "alone_s"] += hi - lo
        for part in ("standby_s", "phases"):
            for name, seconds in (row.get(part) or {}).items():
                stats[part][name] = stats[part].get(name, 0.0) + seconds
    # rounded once, at the end: rounding each partial sum drifts by up to 0.05 s a job
    for stats in out.values():
        for key, value in stats.items():
            if isinstance(value, float):
                stats[key] = round(value, 1 if key in JOB_SECONDS else 2)
            elif isinstance(value, dict):
                stats[key] = {name: round(seconds, 2) for name, seconds in value.items()}
    return out


def per_job(stats: dict[str, dict], top: int = 6) -> list[str]:
    """One line per job kind and role of `job_stats`: the seconds of an average job waiting for
    the device, holding it alone and shared, waiting for its worker, from its report to its
    reaping (where logged), and its `top` longest phases (the waits for the device, `handoff` and
    `shared_wait`, left out: the holds say what the device did)."""
    lines = []
    for name, s in sorted(stats.items()):
        n = s["jobs"]
        phases = sorted(((v / n, k) for k, v in s["phases"].items()
                         if k not in ("handoff", "shared_wait", "other")), reverse=True)[:top]
        waits = ", ".join(f"{k} {v / n:.2f}" for k, v in sorted(s["standby_s"].items()))
        exit_s = f", exit {s['exit_s'] / n:.2f} s" if "exit_s" in s else ""
        exit_s += f", CPU {s['cpu_s'] / n:.1f} s" if "cpu_s" in s else ""
        lines.append(f"{name} ({n} jobs): waited {s['wait_s'] / n:.2f} s, alone "
                     f"{s['alone_s'] / n:.2f} s, shared "
                     f"{s['shared_s'] / n:.2f} s, worker {waits or '-'}{exit_s}; "
                     + ", ".join(f"{k} {v:.2f}" for v, k in phases))
    return lines


def _write(row: dict) -> None:
    path = os.environ.get("KERNEL_REFINE_TESTLOG")
    if path and not _WORKER:
        with open(path, "a") as log:
            log.write(json.dumps(row) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"nodeid": nodeid, "when": "start"})


def pytest_runtest_logreport(report):
    row = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
           "duration": round(report.duration, 2)}
    if report.failed:
        row["message"] = str(report.longrepr)[-FAILURE_CHARS:]
    _write(row)


def read(path) -> tuple[dict[str, dict], list[dict], list[str]]:
    """Per test file: passed / failed / skipped / seconds (setup and teardown included); each
    failure with its text; the tests started but never finished (killed at the limit)."""
    files: dict[str, dict] = {}
    outcome: dict[str, str] = {}
    failures, started = [], []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        row = json.loads(line)
        node = row["nodeid"]
        name = node.split("::")[0]
        stats = files.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0})
        if row["when"] == "start":
            started.append(node)
            continue
        stats["seconds"] += row["duration"]
        if row["outcome"] == "failed":
            if outcome.get(node) != "failed":
                failures.append({"test": node, "when": row["when"], "message": row["message"]})
            outcome[node] = "failed"
        elif row["outcome"] == "skipped" and node not in outcome:
            outcome[node] = "skipped"
        elif row["when"] == "call" and node not in outcome:
            outcome[node] = "passed"
    for node, result in outcome.items():
        files[node.split("::")[0]][result] += 1
    for stats in files.values():
        stats["seconds"] = round(stats["seconds"], 1)  # once: rounding each test's sum drifts
    unfinished = [n for n in started if n not in outcome]
    return files, failures, unfinished
