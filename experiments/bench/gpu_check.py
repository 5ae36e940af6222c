"""`make gpu-check`: does the evaluator's GPU path hold on this host? One command, a few minutes.

On a GPU host that has torch (and no package registry: the device bundle carries the rest), in
this order, each section written to `--out` as soon as it finishes, so a time limit loses only
the section it cut:

1. environment: GPU, driver, SM clock, torch / CUDA / Triton versions, cores;
2. build: every compiled fixture of the GPU tests (`tests/gpu_fixtures.py`), in one parallel pool
   sharing one cache (the longest builds first: those whose nvcc parses torch's headers), before
   any test runs that needs one: the tests start once no more than
   half the pool's slots are still building (a test that needs one of those last builds waits on
   its lock). While it builds, the device would be idle: beside it, the early tests, the GPU
   tests marked `beside_builds` (they need no build, and a busy host cannot make them pass:
   lower bounds on time), alone on the device by its lock; and, once a CUDA fixture has built
   (the cache then has the precompiled headers), throughput: a short throughput batch
   (`experiments.bench.throughput --short --arms framework`), its candidates built cold on a
   cache of its own (the headers copied from the run's cache: a machine's one-time set-up,
   outside the figure). Its figure is a smoke test's; the side-by-side with KernelBench's flow
   (the `stock` arm) is the full benchmark's (docs/benchmarks.md, P2): on two candidates it
   would say little. (H200 run 30: beside the tests, its device jobs came while the tests
   wanted the device, and the tests took 252 s against 214 in run 29; during the build the
   device is idle once the early tests end, ~50 s in, until the tests begin, ~120 s in);
3. tests: the rest of the GPU suite (`pytest -m gpu`) but its `timing` tests, several files at a
   time (pytest-xdist, one file per worker) over the warm cache: the evaluator's device lock
   keeps their timings apart;
4. timing tests: the other `timing` tests (those that measure time, or use the GPU outside that
   lock) with no build competing for the CPU and nothing else on the device. Beside them the
   Ray section starts: the Ray executor's GPU smoke sweep (`experiments/configs/ray_cuda_smoke.yaml`,
   into `ray-sweep/`, emptied first: a sweep resumes; Ray's session logs into
   `ray-logs.tar.gz`), passed only when it judged every kernel of its transcript (all honest)
   `ok`; its kernels are fixtures, built by then. Ray's start (~15 s: Ray, then its GPU stage
   worker) runs beside the timing tests, but not its device jobs: gpu-check holds the host's
   device lock until the timing tests end (their own jobs lock a folder of their own). (Not
   beside the tests, H200 runs 19 and 26: its device jobs queued behind eight test processes'
   and it judged nothing; nor beside the build, run 26: its first kernel, the cache's first CUDA
   build, took 104 s);
5. stability, once the timing tests end, beside the rest of the Ray sweep: the timing-stability
   measurement, short form (`experiments.bench.timing_stability --short --no-do-bench`), with
   `STABILITY_COMPILES` C++ builds of its own alongside. Its agreement with do_bench and with
   KernelBench's timing is the full form's (docs/benchmarks.md, P3): ~25 s of device time that
   the last phase does not have (H200 run 30: the nine evaluations beside the Ray sweep took
   the phase's 126 s; the sweep needed ~40 s more).

It prints one table (test file -> passed / failed / seconds, then the other sections' figures) and
writes into `--out`: `summary.json`, `summary.md` (a block ready for docs/gpu-validation.md),
`NAME.log` (each section's own output; `gpu-check.log`, the workers killed between sections), each
test phase's stream of outcomes
(`testlog-*.jsonl`, written as each test ends) and the JSON of stability and throughput. A
section killed at its limit also leaves its Python processes' stacks in its log (stability,
throughput, Ray).

    python -m experiments.bench.gpu_check --out gpu-check            # what `make gpu-check` runs

Only the standard library is imported before the bundle is unpacked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SECTIONS = ("environment", "build", "early-tests", "tests", "timing-tests", "stability",
            "throughput", "ray")
LIMITS_S = {"build": 150, "early-tests": 120, "ray": 260, "tests": 330, "timing-tests": 120,
            "stability": 200, "throughput": 220}  # caps; the whole run stops at --budget-s
TEST_SECTIONS = ("early-tests", "tests", "timing-tests")
STABILITY_COMPILES = 6
"""The stability form's own C++ builds: about the build pool of a sweep (8 builds), the same six
as runs 28-29's four beside the throughput form's two cold CUDA builds, not twice it (H200 run 24:
three sections side by side, 16 builds and a Ray cluster, overloaded the host and none finished)."""
# stability: run 15's 9 evaluations took 138 s (eager baselines included), do_bench ~25 s more
QUERY = "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm"
STALL_S = 45  # a test still running after this long has every thread's stack dumped into the log


class Check:
    """The run's state: the summary written after every section, the deadline, the log."""

    def __init__(self, out: Path, budget_s: float, env: dict[str, str]) -> None:
        self.out = out
        self.began = time.monotonic()
        self.deadline = self.began + budget_s
        self.env = env
        self.log = out / "gpu-check.log"
        self.lock = threading.Lock()  # sections that run side by side record one at a time
        self.fixture_builds: set[str] = set()  # the build section's cache keys
        self.worker_marker = b"feedback.worker"  # the command line of an evaluator worker
        self.killed = threading.Event()  # a section ran past its limit and was killed
        self.summary: dict = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join(["python -m experiments.bench.gpu_check",
                                                   *sys.argv[1:]]),
                              "budget_s": budget_s, "sections": {}}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def record(self, name: str, result: dict) -> None:
        with self.lock:
            self.summary["sections"][name] = result
            (self.out / "summary.json").write_text(json.dumps(self.summary, indent=2))
            (self.out / "summary.md").write_text(render_markdown(self.summary))
            print(f"[gpu-check] {name}: {result.get('status')} in "
                  f"{result.get('seconds', 0):.0f} s", flush=True)

    def run(self, name: str, argv: list[str], limit_s: float, stacks: bool = False,
            env: dict[str, str] | None = None) -> tuple[int | None, float]:
        """Run one command with its output appended to NAME.log in the run's folder; None as the
        exit code when it ran past its limit (killed with
        its process group and every process it started; the evaluator workers of a section that
        ran beside it live on: `kill_strays` takes what is left once no section runs). With
        `stacks`, before that kill each of its Python processes is asked for its threads' stacks
        (SIGABRT under PYTHONFAULTHANDLER, no core files; `STACKS_S` to write them, the
        command's own into NAME.log), so a section cut at its limit says where it was. (Not for
        the test sections: their evaluator workers' crash messages are what the tests check.)
        `env`: variables of this command only, over the run's."""
        timeout = max(1.0, min(limit_s, self.left()))
        start = time.monotonic()
        with (self.out / f"{name}.log").open("a") as out:
            out.write(f"\n===== {name}: {' '.join(argv)} (limit {timeout:.0f} s)\n")
            out.flush()
            env = {**self.env, **(env or {}), **({"PYTHONFAULTHANDLER": "1"} if stacks else {})}
            proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            try:
                code: int | None = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                from feedback.sandbox import descendants, kill

                started = descendants(proc.pid)  # before the kill, while they are still its own
                if stacks:
                    out.write(f"\n===== {name}: at its limit of {timeout:.0f} s: the stacks of "
                              "its Python processes\n")
                    out.flush()
                    ask_for_stacks([proc.pid, *started])
                os.killpg(proc.pid, 9)
                proc.wait()
                code = None
                orphans = kill(started)
                self.killed.set()
                out.write(f"\n===== {name}: killed at its limit of {timeout:.0f} s"
                          f" (and {orphans} of its processes left running)\n")
        return code, time.monotonic() - start

    def kill_strays(self) -> None:
        """After a section was killed at its limit: kill the evaluator workers still on the
        machine (`worker_marker`), so none runs on into the next section's timings; say so in the
        log. Only then: a section that ends by itself leaves none, and a worker of anyone else's
        evaluation on this host (a sweep beside `make gpu-check`, another test run) must live."""
        if not self.killed.is_set():
            return
        self.killed.clear()
        strays = kill_workers(self.worker_marker)
        if strays:
            with self.log.open("a") as out:
                out.write(f"\n===== {strays} evaluator workers outlived their section: killed\n")


STACKS_S = 3.0


def ask_for_stacks(pids: list[int]) -> None:
    """SIGABRT each Python process of `pids` (under PYTHONFAULTHANDLER it writes every thread's
    stack to its stderr, then dies, without a core file), one at a time, each once the one before
    has died, so stacks written to one log do not interleave (CI: a parent's and its child's
    lines were mixed mid-line); `STACKS_S` for all of them.
    Python by its executable: Ray renames its workers' command lines (`ray::StageWorker.run`)."""
    import resource

    deadline = time.monotonic() + STACKS_S
    for pid in pids:
        try:
            if "python" not in os.path.basename(os.readlink(f"/proc/{pid}/exe")):
                continue
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            os.kill(pid, 6)
        except OSError:
            continue
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)


def _running(pid: int) -> bool:
    """Whether `pid` is still a live process (a zombie has written all it will)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def kill_workers(marker: bytes = b"feedback.worker") -> int:
    """Kill every evaluator worker still running (`python -m feedback.worker`): each runs in a
    session of its own, so killing a section's process group leaves them running on the GPU,
    where they would disturb the next section's timings. Returns how many were killed (those
    with `marker` as an argument)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if marker in (proc / "cmdline").read_bytes().split(b"\0") \
                    and int(proc.name) != os.getpid():
                found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    from feedback.sandbox import kill

    return kill(found)


def unpack_bundle(bundle: Path | None) -> list[str]:
    """Unpack the device bundle where the project's packages are missing; the folders to put on
    PYTHONPATH (none when everything imports already)."""
    try:
        import langgraph  # noqa: F401
        import pydantic  # noqa: F401
        return []
    except ImportError:
        pass
    if bundle is None or not bundle.exists():
        raise SystemExit("gpu-check: the project's packages are missing and there is no device "
                         "bundle: run `make device-bundle` where pip works and carry .device/")
    site = Path("/tmp/kernel-refine-site")
    if not (site / ".unpacked").exists():
        site.mkdir(parents=True, exist_ok=True)
        with tarfile.open(bundle) as tar:
            tar.extractall(site, filter="fully_trusted")
        (site / ".unpacked").touch()
    sys.path.insert(0, str(site))
    return [str(site)]


def environment(check: Check) -> dict:
    import torch

    facts: dict = {"python": sys.version.split()[0], "torch": torch.__version__,
                   "cuda": torch.version.cuda, "cores": os.cpu_count(),
                   "timing_core_siblings": _siblings(max(os.sched_getaffinity(0)))}
    try:
        import triton
        facts["triton"] = triton.__version__
    except ImportError:
        facts["triton"] = None
    if torch.cuda.is_available():
        facts["device"] = torch.cuda.get_device_name(0)
        facts["gpus"] = torch.cuda.device_count()
    facts["nvidia_smi"] = _first_line(["nvidia-smi", QUERY, "--format=csv,noheader"], first=True)
    facts["nvcc"] = _first_line(["nvcc", "--version"], first=False)
    facts["status"] = "passed" if torch.cuda.is_available() else "failed"
    return facts


def _siblings(core: int) -> str | None:
    """The hardware threads that share `core` (GPU 0's timing core, feedback/cores.py) as the
    kernel lists them: `15` alone, or `7,15` where a build on 7 would share its execution units."""
    try:
        topology = Path(f"/sys/devices/system/cpu/cpu{core}/topology")
        return (topology / "thread_siblings_list").read_text().strip()
    except OSError:
        return None


def _first_line(argv: list[str], first: bool) -> str | None:
    """The first (or last) line a tool prints, or None where it is missing."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.strip().splitlines()
    return (lines[0] if first else lines[-1]) if lines else None


def build(check: Check, jobs: int, tail: threading.Event | None = None,
          headers: threading.Event | None = None) -> dict:
    """Every fixture of the GPU tests, `jobs` builds at a time, into the run's one cache.
    `headers` is set once a CUDA fixture has built (the cache then holds the precompiled headers
    a CUDA build makes first), `tail` once at most `jobs // 2` builds are left (none waiting for
    a slot): the tests may start
    beside those (H200, run 10: 37 of 40 fixtures built in 42 s, the last three, which parse
    torch's headers in nvcc, took 95-98 s); a test that needs one of them waits on its lock.
    (The tests beside the whole build, H200 run 22: the test processes raced the pool to the
    fixtures and built 26 of them themselves, the build took 128 s instead of 94 and the tests
    314 s instead of 247.)"""
    sys.path.insert(0, str(REPO / "tests"))
    from gpu_fixtures import gpu_fixtures

    from feedback.compile import compile_candidate, locate
    from feedback.fastbuild_light import went_light
    from feedback.options import EvalOptions
    from problems.spec import select

    options = EvalOptions(device="cuda:0", compile_timeout_s=max(60, int(check.left())))
    fixtures = list({(code, backend): (spec, code, backend)
                     for spec, code, backend in gpu_fixtures()}.values())  # one build per source
    ordered = first_per_extension(fixtures, options)
    check.fixture_builds = {locate(code, backend, options).key for _, code, backend in ordered}
    left, counting = [len(ordered)], threading.Lock()

    def one(item) -> dict:
        spec, code, backend = item
        try:
            problem = select(spec).problems[0] if isinstance(spec, str) else spec
            outcome = compile_candidate(problem, code, backend, options)
            if headers is not None and backend == "cuda" and outcome.status.value == "ok":
                headers.set()
        finally:
            with counting:
                left[0] -= 1
                if tail is not None and left[0] <= jobs // 2:
                    tail.set()
        return {"problem": problem.id, "backend": backend, "status": outcome.status.value,
                "seconds": round(outcome.seconds, 1), "cached": outcome.cached,
                "light": went_light(locate(code, backend, options).extensions_dir)}

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        builds = list(pool.map(one, ordered))
    timeouts = [b for b in builds if b["status"] == "timeout"]
    return {"status": "failed" if timeouts else "passed", "fixtures": len(builds),
            "builds": builds, "cold": sum(not b["cached"] for b in builds),
            "light": sum(b["light"] is True for b in builds),
            "stock_after_light": sum(b["light"] is False for b in builds)}


def first_per_extension(fixtures: list, options) -> list:
    """The fixtures reordered: one per distinct extension build first, the longest of those
    (`parses_torch_headers`) at the very front, the rest after. Candidates that differ in Python
    alone share one build (feedback/cache.py, `ext/`); in list order they would fill the pool's
    slots waiting on that build's lock while other extensions wait. (H200 run 28: the three
    builds whose nvcc parses torch's headers took 117-129 s each, the other 37 5-53 s; begun
    ~28 s in, behind the first wave, they ended the build at 156 s and held the tests back.)"""
    from feedback.compile import locate

    seen, first, rest = set(), [], []
    for item in fixtures:
        ext = locate(item[1], item[2], options).extensions_dir
        (rest if ext in seen else first).append(item)
        seen.add(ext)
    return sorted(first, key=lambda item: not parses_torch_headers(item[1], item[2])) + rest


def parses_torch_headers(code: str, backend: str) -> bool:
    """Whether nvcc compiles torch's headers for this candidate (a CUDA `load_inline` without
    `no_implicit_headers=True` gets `<torch/extension.h>` in its .cu): a build ~4x as long as
    one without (tests/hardening/gpu_corpus.py)."""
    return backend == "cuda" and not re.search(r"no_implicit_headers\s*=\s*True", code)


def xdist_available() -> bool:
    try:
        import xdist  # noqa: F401
        return True
    except ImportError:
        return False


def gpu_test_files() -> list[str]:
    """The test files that mark GPU tests (`pytest.mark.gpu`, as a module's `pytestmark` or on a
    test): pytest collects only these, not all of tests/ (collecting the whole suite to deselect
    all but the GPU tests took ~16 s per pytest process, 8 of them at once in the tests phase)."""
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py")
                  if "mark.gpu" in p.read_text())


def tests(check: Check, name: str, marker: str, workers: int, cache: Path,
          select: list[str] | None = None, locks: Path | None = None) -> dict:
    """One test phase. `locks`: a device-lock folder of its own (`KERNEL_REFINE_LOCKS`), for a
    phase whose evaluator jobs must not wait for the host's lock while gpu-check holds it."""
    from experiments.bench import testlog
    from feedback.evaluate import LOCKS_ENV

    log, joblog = check.out / f"testlog-{name}.jsonl", check.out / f"joblog-{name}.jsonl"
    log.unlink(missing_ok=True)
    joblog.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "pytest", "-q", "-m", marker, "-p", "no:cacheprovider",
            "-p", "experiments.bench.testlog", "-o", f"faulthandler_timeout={STALL_S}",
            *(select or gpu_test_files())]
    if workers > 1 and xdist_available():
        argv[4:4] = ["-n", str(workers), "--dist", "loadfile"]
    started = time.time()
    env = {"KERNEL_REFINE_TESTLOG": str(log), "KERNEL_REFINE_JOBLOG": str(joblog),
           **({LOCKS_ENV: str(locks)} if locks is not None else {})}
    code, _ = check.run(name, argv, LIMITS_S[name], env=env)
    files, failures, unfinished = testlog.read(log)
    passed = sum(r["passed"] for r in files.values())
    failed = sum(r["failed"] for r in files.values())
    # builds that the fixture list missed: each cost a cold build inside a test
    late = [p.parent.name for p in (cache / "build").glob("*/outcome.json")
            if p.stat().st_mtime > started and p.parent.name not in check.fixture_builds]
    status = "timeout" if code is None else ("passed" if code in (0, 5) and not failed else "failed")
    crashed = any("crashed while running" in f["message"] for f in failures)
    return {"kernel_log": kill_messages(_kernel_log()) if crashed else None,
            "status": status, "exit_code": code,
            "summary": f"{passed} passed, {failed} failed"
                       + (f", {len(unfinished)} not finished" if unfinished else ""),
            "passed": passed, "failed": failed, "files": files, "failures": failures,
            "unfinished": unfinished, "builds_during_tests": len(late),
            "jobs": testlog.jobs(joblog)}


KILL_WORDS = re.compile(r"out of memory|oom-kill|oom_reaper|killed process", re.IGNORECASE)


def kill_messages(text: str | None, last: int = 20) -> list[str] | None:
    """The kernel's last lines about processes it killed (the OOM killer), from `dmesg` text:
    what a crashed pytest worker (`node down`, no traceback) leaves behind; None unread."""
    if text is None:
        return None
    return [line for line in text.splitlines() if KILL_WORDS.search(line)][-last:]


def _kernel_log() -> str | None:
    try:
        got = subprocess.run(["dmesg", "-T"], capture_output=True, text=True, timeout=10,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return got.stdout if got.returncode == 0 else None


def bench(check: Check, name: str, argv: list[str], result_file: Path,
          figures: Callable[[dict], dict]) -> dict:
    code, seconds = check.run(name, argv, LIMITS_S[name], stacks=True)
    out: dict = {"status": "passed" if code == 0 else ("timeout" if code is None else "failed"),
                 "exit_code": code, "seconds": round(seconds, 1)}
    if result_file.exists():
        try:
            out.update(figures(json.loads(result_file.read_text())))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            out["figures_error"] = f"{type(exc).__name__}: {exc}"
    if out.get("verdicts_ok") is False and out["status"] == "passed":
        out["status"] = "failed"  # it ran, but judged an honest kernel wrongly
    return out


def ray_section(check: Check, py: str, runs: Path) -> dict:
    """The Ray GPU smoke sweep into `runs`, then Ray's own logs of it (its session's `logs/`,
    each file's last `RAY_LOG_BYTES`) into `ray-logs.tar.gz`: where a sweep that judged nothing
    spent its time."""
    argv = [py, "-m", "experiments.sweep", "experiments/configs/ray_cuda_smoke.yaml",
            "--executor", "ray", "--out", str(runs)]
    try:
        return bench(check, "ray", argv, runs / "sweep.json", ray_figures)
    finally:
        keep_ray_logs(Path(tempfile.gettempdir()) / "ray" / "session_latest" / "logs",
                      check.out / "ray-logs.tar.gz")


RAY_LOG_BYTES = 256 * 1024


def keep_ray_logs(logs: Path, archive: Path) -> int:
    """The last `RAY_LOG_BYTES` of each file under `logs` into `archive`; how many files."""
    import io

    kept = 0
    if not logs.is_dir():
        return kept
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(p for p in logs.rglob("*") if p.is_file()):
            try:
                with path.open("rb") as fh:
                    fh.seek(max(0, path.stat().st_size - RAY_LOG_BYTES))
                    data = fh.read(RAY_LOG_BYTES)
            except OSError:
                continue
            info = tarfile.TarInfo(str(path.relative_to(logs)))
            info.size, info.mtime = len(data), int(path.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
            kept += 1
    return kept


def stability_figures(data: dict) -> dict:
    kernels = data.get("kernels", [])
    spreads = [k["spread_pct"] for k in kernels if k.get("spread_pct") is not None]
    return {"kernels": [{k: row.get(k) for k in ("name", "median_ms", "evaluations", "spread_pct",
                                                 "do_bench_ms")} for row in kernels],
            "max_spread_pct": max(spreads) if spreads else None}


def ray_figures(index: dict) -> dict:
    """The smoke sweep's verdicts (every attempt of its transcript is an honest kernel, so each
    must be `ok`): a sweep that ran but judged wrongly fails the section."""
    from experiments.runs import load_run

    statuses = [a.result.status.value if a.result else "no code"
                for entry in index.get("runs", []) if entry.get("path")
                for a in load_run(Path(entry["path"])).attempts()]
    return {"attempts": len(statuses), "statuses": statuses,
            "verdicts_ok": bool(statuses) and all(s == "ok" for s in statuses)}


def throughput_figures(data: dict) -> dict:
    keys = ("candidates", "problems", "framework_per_hour", "kernelbench_per_hour",
            "build_median_s", "device_s_per_candidate")
    return {k: data.get(k) for k in keys}


def render_markdown(summary: dict) -> str:
    """The block for docs/gpu-validation.md."""
    s = summary["sections"]
    env = s.get("environment", {})
    device = (f"- Device: {env.get('device')} ({env.get('nvidia_smi')}); torch {env.get('torch')} "
              f"(CUDA {env.get('cuda')}), Triton {env.get('triton')}, {env.get('nvcc')}, Python "
              f"{env.get('python')}, {env.get('cores')} cores (the timing core's hardware threads: "
              f"{env.get('timing_core_siblings')}).")
    lines = [f"## {summary['date'][:10]} — `make gpu-check`", "", device,
             f"- Command: `{summary['command']}`", ""]
    if "build" in s:
        b = s["build"]
        built = (f"- Fixtures built first: {b.get('fixtures')} ({b.get('cold')} cold; CUDA "
                 f"sources built light: {b.get('light')}, stock after a failed light build: "
                 f"{b.get('stock_after_light')}) in {b.get('seconds', 0):.0f} s: {b['status']}.")
        lines += [built, ""]
    rows = []
    for name in TEST_SECTIONS:
        part = s.get(name)
        if not part:
            continue
        lines.append(f"- `{name}`: **{part.get('summary', part.get('reason', part.get('error')))}** in "
                     f"{part['seconds']:.0f} s ({part['status']}; builds during the tests: "
                     f"{part.get('builds_during_tests')})")
        rows += [(f, r) for f, r in part.get("files", {}).items()]
    if rows:
        lines += ["", "| test file | passed | failed | skipped | seconds |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {f} | {r['passed']} | {r['failed']} | {r['skipped']} | {r['seconds']} |"
                  for f, r in rows]
    for name in TEST_SECTIONS:
        jobs = s.get(name, {}).get("jobs", {})
        if jobs:
            lines.append(f"- `{name}` evaluator jobs: " + "; ".join(
                f"{k} {j['jobs']} jobs, {j['seconds']:.0f} s (waited {j['wait_s']:.0f} s for the "
                f"device, held it {j['held_s']:.0f} s)" for k, j in jobs.items()))
    for name in TEST_SECTIONS:
        for fail in s.get(name, {}).get("failures", []):
            first = fail["message"].strip().splitlines()[:1] or [""]
            lines.append(f"- FAILED `{fail['test']}`: {first[0][:300]}")
        if s.get(name, {}).get("kernel_log"):
            lines += [f"  - kernel: `{line[:200]}`" for line in s[name]["kernel_log"]]
    lines.append("")
    if "stability" in s:
        st = s["stability"]
        lines.append(f"- Timing stability (short form): {st['status']}, largest spread "
                     f"{st.get('max_spread_pct')}% over {len(st.get('kernels', []))} kernels")
        for k in st.get("kernels", []):
            lines.append(f"  - {k['name']}: median {k['median_ms']} ms, {k['evaluations']} "
                         f"evaluations, spread {k['spread_pct']}%, do_bench {k['do_bench_ms']} ms")
    if "throughput" in s:
        t = s["throughput"]
        lines.append(f"- Throughput (short form, beside the build): {t['status']}, "
                     f"{t.get('candidates')} candidates "
                     f"of {t.get('problems')} problems: framework {t.get('framework_per_hour')}/h, "
                     f"KernelBench's flow {t.get('kernelbench_per_hour')}/h, build median "
                     f"{t.get('build_median_s')} s")
    if "ray" in s:
        lines.append(f"- Ray GPU smoke sweep: {s['ray']['status']} in {s['ray']['seconds']:.0f} s "
                     f"(verdicts: {s['ray'].get('statuses')})")
    return "\n".join(lines) + "\n"


def print_table(summary: dict) -> None:
    from experiments.bench import testlog

    s = summary["sections"]
    print(f"\n{'test file':58s} {'passed':>6s} {'failed':>6s} {'seconds':>8s}")
    for name in TEST_SECTIONS:
        for f, r in s.get(name, {}).get("files", {}).items():
            print(f"{f[-58:]:58s} {r['passed']:6d} {r['failed']:6d} {r['seconds']:8.1f}")
    for name in TEST_SECTIONS:
        if name in s:
            print(f"{name}: {s[name].get('summary', s[name].get('reason', s[name].get('error')))} "
                  f"({s[name]['status']}, {s[name]['seconds']:.0f} s)")
            for fail in s[name].get("failures", []):
                print(f"  FAILED {fail['test']}")
            for node in s[name].get("unfinished", []):
                print(f"  NOT FINISHED {node}")
            if s[name].get("kernel_log") is not None or any(
                    "crashed while running" in f["message"] for f in s[name].get("failures", [])):
                print(f"  a worker crashed; the kernel's kill messages: {s[name].get('kernel_log')}")
            for line in testlog.per_job(s[name].get("jobs", {})):
                print(f"  jobs {line}")
    if "stability" in s:
        print(f"stability: max spread {s['stability'].get('max_spread_pct')}% "
              f"({s['stability']['status']})")
    if "throughput" in s:
        t = s["throughput"]
        print(f"throughput: {t.get('framework_per_hour')}/h framework, "
              f"{t.get('kernelbench_per_hour')}/h KernelBench flow ({t['status']})")
    if "ray" in s:
        print(f"ray smoke: {s['ray']['status']} ({s['ray']['seconds']:.0f} s; verdicts "
              f"{s['ray'].get('statuses')})")
    print("sections: " + ", ".join(f"{k}={v.get('status')}" for k, v in s.items()))


def run_section(check: Check, skip: list[str], name: str, fn: Callable[[], dict]) -> None:
    """Run one section unless skipped or out of time, and record it however it ends."""
    if name in skip:
        return
    if check.left() < 5:
        check.record(name, {"status": "skipped", "seconds": 0, "reason": "no time left"})
        return
    start = time.monotonic()
    try:
        result = fn()
    except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
        result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    result["seconds"] = round(time.monotonic() - start, 1)
    result["began_s"] = round(start - check.began, 1)  # the run's timeline
    check.record(name, result)


def wait_for(event: threading.Event, section: Future) -> None:
    """Until `event` is set or `section` (the one that sets it) has ended however it ended."""
    while not (event.wait(1) or section.done()):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the results")
    parser.add_argument("--bundle", type=Path, default=REPO / ".device" / "site.tar.xz",
                        help="device bundle to unpack when the project's packages are missing")
    parser.add_argument("--budget-s", type=float, default=540, help="wall-clock budget (9 min)")
    parser.add_argument("--build-jobs", type=int, default=12, help="concurrent fixture builds")
    parser.add_argument("--test-workers", type=int, default=8, help="pytest-xdist workers")
    parser.add_argument("--tests", action="append", default=[], metavar="PATH",
                        help="test files or node ids instead of tests/ (repeatable): a re-run of "
                             "what an earlier run's budget cut")
    parser.add_argument("--skip", action="append", default=[], choices=SECTIONS,
                        help="leave a section out (repeatable)")
    args = parser.parse_args(argv)

    extra_path = unpack_bundle(args.bundle)
    args.out.mkdir(parents=True, exist_ok=True)
    cache = Path(os.environ.get("KERNEL_REFINE_CACHE", "/tmp/kernel-refine-gpu-check-cache"))
    os.environ["KERNEL_REFINE_CACHE"] = str(cache)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [*extra_path, str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    os.environ["PYTHONUNBUFFERED"] = "1"
    check = Check(args.out, args.budget_s, dict(os.environ))
    py = sys.executable

    run_section(check, args.skip, "environment", lambda: environment(check))
    tail, headers = threading.Event(), threading.Event()
    stability_json, throughput_json = args.out / "stability.json", args.out / "throughput.json"
    with ThreadPoolExecutor(3) as early:
        # while the fixtures build the device would be idle: the tests that need no build and
        # that a busy host cannot make pass run there, and the throughput form
        started = [early.submit(run_section, check, args.skip, "build",
                                lambda: build(check, args.build_jobs, tail, headers)),
                   early.submit(run_section, check, args.skip, "early-tests",
                                lambda: tests(check, "early-tests", "gpu and beside_builds", 1,
                                              cache, args.tests))]
        wait_for(headers, started[0])
        started.append(early.submit(  # its candidates build with the headers the build made
            run_section, check, args.skip, "throughput", lambda: bench(
                check, "throughput", [py, "-m", "experiments.bench.throughput", "--short",
                                      "--arms", "framework", "--pch-from", str(cache),
                                      "--out", str(throughput_json)],
                throughput_json, throughput_figures)))
        wait_for(tail, started[0])
        run_section(check, args.skip, "tests",  # beside the build's last few
                    lambda: tests(check, "tests", "gpu and not timing and not beside_builds",
                                  args.test_workers, cache, args.tests))
        for done in started:
            done.result()
    check.kill_strays()
    runs = args.out / "ray-sweep"  # its run store and run.log come back with the rest
    shutil.rmtree(runs, ignore_errors=True)  # a sweep resumes: start empty
    from feedback.cache import locked
    from feedback.evaluate import device_lock
    from feedback.options import EvalOptions

    with ThreadPoolExecutor(1) as side, tempfile.TemporaryDirectory(prefix="kr-locks-") as own:
        # the sweep starts Ray while the timing tests run; gpu-check holds the host's device
        # lock until they end (their jobs lock a folder of their own), so its device jobs wait
        with locked(device_lock(EvalOptions(device="cuda:0"))):
            ray = side.submit(run_section, check, args.skip, "ray",
                              lambda: ray_section(check, py, runs))
            run_section(check, args.skip, "timing-tests", lambda: tests(
                check, "timing-tests", "gpu and timing and not beside_builds", 1, cache,
                args.tests, locks=Path(own)))
        run_section(check, args.skip, "stability", lambda: bench(
            check, "stability", [py, "-m", "experiments.bench.timing_stability", "--short",
                                 "--no-do-bench", "--compiles", str(STABILITY_COMPILES),
                                 "--out", str(stability_json)], stability_json, stability_figures))
        ray.result()
    check.kill_strays()
    print_table(check.summary)
    bad = [k for k, v in check.summary["sections"].items() if v.get("status") != "passed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
