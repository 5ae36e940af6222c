"""`evaluate()`: static screen -> compile -> correctness -> timing (-> profile), first failure wins.

Every stage that runs candidate code runs it in a fresh sandboxed child (`python -m
feedback.worker JOB.json`) and trusts only the report file that child leaves, so a crash, hang,
exit or forged result is a status, never an exception here. Device jobs hold a per-device lock
(threads and processes alike): a timing or profile has the GPU to itself, so nothing else runs on
it while one is measured; correctness jobs hold the lock shared and may overlap each other.

CLI: python -m feedback.evaluate PROBLEM CANDIDATE.py --backend {cuda,triton,cpp} [--json]
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from feedback import cache
from feedback.api import Evaluator
from feedback.compile import BuildPaths, compile_candidate, locate, path_names
from feedback.environment import device_index, host_environment, known_device, roofline
from feedback.job import (
    BASELINE_ROLES,
    BUILD_FILE_BYTES,
    RUN_FILE_BYTES,
    JobRun,
    WorkerReport,
    launch,
    standby_unfinished,
    standby_workers,
)
from feedback.messages import clean_message
from feedback.options import Backend, EvalOptions
from feedback.result import EvalResult, Status
from feedback.static import render, screen
from problems.cli import CLIParser
from problems.record import Problem
from problems.spec import SpecError, select

SHORT_OF_MEMORY = re.compile(
    r"out of memory|ALLOC_FAILED|NOT_ENOUGH_WORKSPACE|CUDNN_STATUS_INTERNAL_ERROR")
"""A failure that other jobs on the device may have caused with their memory (correctness jobs
share it; a time job prepares beside them and waits for its timed part holding what it prepared):
such a job runs once more with the device to itself from its start before its verdict stands
(`_run_sure`)."""


LOCKS_ENV = "KERNEL_REFINE_LOCKS"
"""The folder of this host's device locks (default: <tmp>/kernel-refine-locks)."""


def device_lock(options: EvalOptions, gpu: bool = True) -> Path:
    """The lock file of the evaluation device (`options.device`, or this host's CPU): every job
    that runs on it holds this lock (feedback/job.py, `launch`), and so may anything else that
    must not share the device with a timing. One per device of this host, whatever the cache:
    evaluations with caches of their own (a sweep and a re-scoring, the throughput bench's cold
    cache) must not time on one GPU at once either, and a cache shared by the nodes of a Ray
    cluster must not make one node wait for another's GPU (or depend on its file system's locks)."""
    device = options.device.replace(':', '') if gpu else 'cpu'
    root = Path(os.environ.get(LOCKS_ENV) or Path(tempfile.gettempdir()) / "kernel-refine-locks")
    if not root.exists():
        with contextlib.suppress(OSError):  # every user of the host locks the same devices
            root.mkdir(parents=True, exist_ok=True)
            root.chmod(0o1777)
    return root / f"{socket.gethostname()}-{device}.lock"


def _run(kind: str, role: str, problem: Problem, backend: Backend, options: EvalOptions,
         paths: BuildPaths | None, alone: bool = False) -> JobRun:
    """One worker job on the evaluation device, holding that device's lock (`alone`: even a
    correctness job holds it by itself); a `baselines` job has a time limit per part."""
    gpu = backend != "cpp"
    root = Path(options.cache_dir).resolve()
    ext = paths.extensions_dir if paths is not None else root / "inductor"
    ext.mkdir(parents=True, exist_ok=True)
    (root / "inductor").mkdir(parents=True, exist_ok=True)
    parts = len(BASELINE_ROLES) if role == "baselines" else 1
    return launch(kind, problem, backend, options, role=role,
                  candidate=paths.candidate if paths is not None else None, extensions_dir=ext,
                  arch=paths.arch if paths is not None else None,
                  gpu_index=device_index(options.device) if gpu else None,
                  timeout_s=options.run_timeout_s * parts,
                  device_lock=device_lock(options, gpu), alone=alone,
                  max_output_bytes=RUN_FILE_BYTES if role == "candidate" else BUILD_FILE_BYTES)


def _run_sure(kind: str, role: str, problem: Problem, backend: Backend, options: EvalOptions,
              paths: BuildPaths | None) -> JobRun:
    """`_run`, and once more alone when it ran short of memory (SHORT_OF_MEMORY): a kernel or a
    baseline must not fail for the memory of the jobs beside it."""
    run = _run(kind, role, problem, backend, options, paths)
    if any(r.status == Status.runtime_error and SHORT_OF_MEMORY.search(r.message)
           for r in (run.report, *run.report.parts)):
        run = _run(kind, role, problem, backend, options, paths, alone=True)
        said = (f"the {kind} job ran short of device memory beside other jobs and was run again "
                "with the device to itself")
        run = run.model_copy(update={"report": run.report.model_copy(
            update={"warnings": [*run.report.warnings, said]})})
    return run


def _fail(result: EvalResult, stage: str, report: WorkerReport, names: dict[str, str],
          seconds: float) -> EvalResult:
    status = report.status
    if result.backend == "triton" and status == Status.runtime_error \
            and "CompilationError" in report.message:
        status = Status.compile_error  # Triton compiles at the first launch, in this child
    return result.model_copy(update={
        "status": status, "stage": stage, "message": clean_message(report.message, names),
        "correctness": report.correctness or result.correctness,
        "warnings": _merge(result.warnings, report.warnings),
        "stage_seconds": {**result.stage_seconds, stage: seconds}})


def _merge(old: list[str], new: list[str]) -> list[str]:
    return old + [w for w in new if w not in old]


def _references(problem: Problem, kind: str, roles: Sequence[str], backend: Backend,
                options: EvalOptions, device_name: str | None) -> dict[str, WorkerReport]:
    """Baselines' reports by role, from the cache when this device/torch/size measured them
    before; those missing are measured by one job (a `baselines` job when it is both time
    baselines) and cached when they pass."""
    paths = {role: cache.reference_path(options, problem, kind, role, backend, device_name)
             for role in roles}

    def cached() -> dict[str, WorkerReport]:
        hits = {role: cache.read_record(path, WorkerReport) if path else None
                for role, path in paths.items()}
        return {role: hit for role, hit in hits.items() if hit is not None}
    found = cached()
    if len(found) == len(roles):
        return found
    # one measurement of a baseline at a time: a batch's early one and a candidate's (the locks
    # in one order, so two measurements of overlapping roles cannot wait for each other)
    with contextlib.ExitStack() as held:
        for role in sorted(role for role in roles if role not in found and paths[role]):
            held.enter_context(cache.locked(paths[role].with_suffix(".lock")))
        found = cached()
        missing = [role for role in roles if role not in found]
        if not missing:
            return found
        both = kind == "time" and tuple(missing) == BASELINE_ROLES
        for job_role, measured in [("baselines", missing)] if both else [(r, [r]) for r in missing]:
            run = _run_sure(kind, job_role, problem, backend, options, None)
            parts = {part.role: part for part in run.report.parts} if run.trusted else {}
            for role in measured:
                report = parts[role].model_copy(update={"environment": run.report.environment}) \
                    if role in parts else run.report.model_copy(update={"role": role, "parts": []})
                if paths[role] and run.trusted and report.status == Status.ok:
                    cache.write_record(paths[role], report)
                found[role] = report
    return found


def _reference(problem: Problem, kind: str, role: str, backend: Backend, options: EvalOptions,
               device_name: str | None) -> WorkerReport:
    """One baseline's report (`_references`)."""
    return _references(problem, kind, (role,), backend, options, device_name)[role]


def _time_roles(options: EvalOptions) -> tuple[str, ...]:
    """The time baselines `options` ask for."""
    return BASELINE_ROLES if options.compile_baseline else BASELINE_ROLES[:1]


def _built_here(problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> tuple[BuildPaths, EvalResult | None]:
    """The candidate's build on this machine, building it first when compile() ran elsewhere
    (another node of a Ray cluster whose cache this node does not share); the second value is
    the failed result when that build fails."""
    paths = locate(code, backend, options)
    if paths.outcome.exists() and paths.candidate.exists():
        return paths, None
    built = compile_candidate(problem, code, backend, options)
    if built.status == Status.ok:
        return paths, None
    return paths, prior.model_copy(update={"status": built.status, "stage": "compile",
                                           "message": built.message or built.log})


class LocalEvaluator:
    """The evaluator on this machine; each method is one node of the agent's graph."""

    def compile(self, problem: Problem, code: str, backend: Backend,
                options: EvalOptions) -> EvalResult:
        start = time.monotonic()
        result = EvalResult(status=Status.ok, backend=backend, problem_id=problem.id,
                            code_hash=cache.code_hash(code), size=options.size,
                            environment=host_environment(backend, options.device))
        findings = screen(code, backend)
        result = result.model_copy(update={
            "warnings": [f.render() for f in findings if f.severity == "warning"],
            "stage_seconds": {"static": time.monotonic() - start}})
        if any(f.severity == "error" for f in findings):
            return result.model_copy(update={"status": Status.static_reject, "stage": "static",
                                             "message": render(findings)})
        built = compile_candidate(problem, code, backend, options)
        result = result.model_copy(update={
            "warnings": _merge(result.warnings, built.warnings),
            "stage_seconds": {**result.stage_seconds, "compile": built.seconds}})
        if built.status != Status.ok:
            return result.model_copy(update={"status": built.status, "stage": "compile",
                                             "message": built.message or built.log})
        return result

    def correct(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        if prior.status != Status.ok:
            return prior
        start = time.monotonic()
        paths, failed = _built_here(problem, code, backend, options, prior)
        if failed is not None:
            return failed
        run = _run_sure("correct", "candidate", problem, backend, options, paths)
        if run.report.status != Status.ok:
            return _fail(prior, "correct", run.report, path_names(paths), time.monotonic() - start)
        env = prior.environment
        if run.report.environment is not None and known_device(env) is None:
            env = run.report.environment
        return prior.model_copy(update={
            "correctness": run.report.correctness, "environment": env,
            "warnings": _merge(prior.warnings, run.report.warnings),
            "stage_seconds": {**prior.stage_seconds, "correct": time.monotonic() - start}})

    def baselines(self, problem: Problem, backend: Backend, options: EvalOptions) -> None:
        """Time the problem's baselines into the cache ahead of its candidates (a batch does this
        while they build, when the device is otherwise idle), so `perform` finds them measured.
        Nothing when they will not be timed, or where the device has no name to key them by."""
        if not (options.time and options.baselines):
            return
        device = known_device(host_environment(backend, options.device))
        if device is None:
            return
        _references(problem, "time", _time_roles(options), backend, options, device)
        if options.profile:
            _reference(problem, "profile", "eager", backend, options, device)

    def perform(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        if prior.status != Status.ok or not (options.time or options.profile):
            return prior
        paths, failed = _built_here(problem, code, backend, options, prior)
        if failed is not None:
            return failed
        result, device, names = prior, known_device(prior.environment), path_names(paths)
        if options.time:
            start = time.monotonic()
            run = _run_sure("time", "candidate", problem, backend, options, paths)
            if run.report.status != Status.ok:
                return _fail(result, "timing", run.report, names, time.monotonic() - start)
            mine, eager, compiled = run.report, None, None
            if options.baselines:
                refs = _references(problem, "time", _time_roles(options), backend, options, device)
                eager, compiled = refs["eager"], refs.get("compiled")
            result = _timed(result, mine, eager, compiled, options, time.monotonic() - start)
        if options.profile:
            start = time.monotonic()
            run = _run_sure("profile", "candidate", problem, backend, options, paths)
            if run.report.status != Status.ok:
                return _fail(result, "profile", run.report, names, time.monotonic() - start)
            ref = _reference(problem, "profile", "eager", backend, options, device)
            result = result.model_copy(update={
                "profile": run.report.profile, "reference_profile": ref.profile,
                "warnings": _merge(result.warnings, run.report.warnings),
                "stage_seconds": {**result.stage_seconds, "profile": time.monotonic() - start}})
        return result


def _timed(result: EvalResult, mine: WorkerReport, eager: WorkerReport | None,
           compiled: WorkerReport | None, options: EvalOptions, seconds: float) -> EvalResult:
    """Fold the candidate's and the baselines' timings into the result (speedups, roofline)."""
    warnings = _merge(result.warnings, mine.warnings)
    baselines = {}
    for name, rep in (("eager", eager), ("compiled", compiled)):
        if rep is not None and rep.status == Status.ok and rep.timing is not None:
            baselines[name] = rep.timing
        elif rep is not None:
            warnings.append(f"{name} baseline not measured: {clean_message(rep.message, None, 5)}")
    run = mine.timing
    speed = {f"speedup_{'eager' if k == 'eager' else 'compile'}": v.median_ms / run.median_ms
             for k, v in baselines.items() if run is not None and run.median_ms > 0}
    flops = mine.flops if mine.flops is not None else (eager.flops if eager else None)
    nbytes = mine.min_bytes if mine.min_bytes is not None else (eager.min_bytes if eager else None)
    device = result.environment.device if result.environment else ""
    sol = roofline(flops, nbytes, run.median_ms if run else None, device,
                   options.peak_tflops, options.peak_bandwidth_gbs)
    if sol is not None and sol.suspicious:
        warnings.append(f"faster than the speed of light ({sol.sol_ms:.4f} ms bound on {device}): "
                        "the measurement or the kernel is suspect")
    return result.model_copy(update={
        "runtime": run, "noise": mine.noise, "eager": baselines.get("eager"),
        "compiled": baselines.get("compiled"), **speed, "roofline": sol, "warnings": warnings,
        "stage_seconds": {**result.stage_seconds, "timing": seconds}})


def evaluate(problem: Problem, code: str, backend: Backend, options: EvalOptions | None = None,
             evaluator: Evaluator | None = None) -> EvalResult:
    """Static screen, compile, correctness, timing (and profile when asked); never raises for
    anything the candidate does. `evaluator` runs the stages elsewhere (e.g. a RayEvaluator);
    None = on this machine."""
    options = options or EvalOptions()
    ev = evaluator or LocalEvaluator()
    result = ev.compile(problem, code, backend, options)
    result = ev.correct(problem, code, backend, options, result)
    return ev.perform(problem, code, backend, options, result)


EvalItem = tuple[Problem, str, Backend]


def _contained(item: EvalItem, step, *args) -> EvalResult:
    """Run a step for one item; an evaluator bug becomes that item's result, not a dead batch."""
    try:
        return step(*args)
    except Exception as exc:  # noqa: BLE001 - one item must never stop the batch
        problem, code, backend = item
        return EvalResult(status=Status.runtime_error, stage="evaluator", backend=backend,
                          problem_id=problem.id, code_hash=cache.code_hash(code),
                          message=f"evaluator error (not the candidate's fault): {exc!r}")


GPU_LANES = 4
"""Candidates in flight on one GPU in a local batch: their correctness jobs share the device
(a timing still has it alone), so the device is not idle while one correctness child starts
CUDA, loads its problem or waits out a hang."""


AHEAD_PROBLEMS = 6
"""Problems whose baselines are timed at once ahead of their candidates in a batch. Each timing
holds the device only for its timed part; before that its worker imports, builds torch.compile's
graph and prepares, all without the device. With one problem at a time, the H200 sat idle through
those steps (runs 43-44: 26-35 s of the first 36-50 s, while the first candidates built) and most
baselines were left to the candidates' own lanes, after their candidate's timing. With 3 the
H100 was still idle 18.6 s before the first build ended (run 68): a baselines job took 14-17 s
from its start to its first hold, beside 8 builds, and held the device about 2.2 s, so three of
them kept it busy about half that time."""


def iter_evaluate(items: Sequence[EvalItem], options: EvalOptions | None = None,
                  devices: Sequence[str] | None = None, compile_workers: int | None = None,
                  evaluator: Evaluator | None = None,
                  lanes: int | None = None) -> Iterator[tuple[int, EvalResult]]:
    """Evaluate many candidates, yielding `(index into items, result)` as each one finishes.

    Builds run in a CPU pool while `lanes` threads per device run correctness and timing, one
    candidate each (None: `GPU_LANES` on this machine's GPUs, 1 for cpp-only batches and for
    another `evaluator`); the device lock lets their correctness jobs overlap and gives each
    timing the device alone. Each problem's baselines are timed into the cache
    (`LocalEvaluator.baselines`, `AHEAD_PROBLEMS` problems at a time) from the start, while the
    candidates build. `evaluator` runs
    the stages elsewhere (a RayEvaluator: pass one device name per stage actor; the actor picks
    its own GPU); None = this machine. Closing the generator early (a consumer's
    KeyboardInterrupt) cancels the builds not started yet and stops the device workers after
    their current job; what was yielded stays yielded.
    """
    options = options or EvalOptions()
    devices = list(devices or [options.device])
    ev = evaluator or LocalEvaluator()
    gpu = any(backend != "cpp" for _, _, backend in items)
    lanes = lanes or (GPU_LANES if gpu and evaluator is None else 1)
    ready: queue.Queue = queue.Queue()
    done: queue.Queue = queue.Queue()
    stop = threading.Event()

    def device_worker(device: str) -> None:
        opts = options.model_copy(update={"device": device})
        while (job := ready.get()) is not None and not stop.is_set():
            i, prior = job
            problem, code, backend = items[i]

            def rest(prior=prior, problem=problem, code=code, backend=backend) -> EvalResult:
                checked = ev.correct(problem, code, backend, opts, prior)
                return ev.perform(problem, code, backend, opts, checked)
            done.put((i, _contained(items[i], rest)))

    def built(i: int, future) -> None:
        if future.cancelled():
            return
        result = future.result()
        (ready if result.status == Status.ok else done).put((i, result))

    def baselines(problem: Problem, backend: Backend) -> None:
        if not stop.is_set():
            with contextlib.suppress(Exception):  # perform() measures (and reports) them again
                ev.baselines(problem, backend, options.model_copy(update={"device": devices[0]}))

    workers = [threading.Thread(target=device_worker, args=(d,), daemon=True)
               for d in devices for _ in range(lanes)]
    pool = ThreadPoolExecutor(compile_workers or max(1, (os.cpu_count() or 2) // 2))
    ahead = ThreadPoolExecutor(AHEAD_PROBLEMS)
    # which unfinished candidates share an extensions folder (a spec of workers started ahead)
    shared = [_extensions_folder(code, backend, options)
              if isinstance(ev, LocalEvaluator) else None for _, code, backend in items]

    def finished(i: int) -> None:
        if shared[i] is not None:
            standby_unfinished(shared[i], -1)
            shared[i] = None
    with standby_workers():  # GPU jobs: the next worker starts while the current one runs
        for folder in filter(None, shared):
            standby_unfinished(folder, 1)
        for w in workers:
            w.start()
        try:
            seen: set[tuple[str, str]] = set()
            for i, item in enumerate(items):
                problem, _, backend = item
                if hasattr(ev, "baselines") and (problem.id, backend) not in seen:
                    seen.add((problem.id, backend))
                    ahead.submit(baselines, problem, backend)
                future = pool.submit(_contained, item, ev.compile, *item, options)
                future.add_done_callback(lambda f, i=i: built(i, f))
            for _ in items:
                i, result = done.get()
                finished(i)
                yield i, result
        finally:
            for i in range(len(items)):  # those a closed generator never yielded
                finished(i)
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            ahead.shutdown(wait=True, cancel_futures=True)  # no baseline child outlives it
            for _ in workers:
                ready.put(None)
            for w in workers:
                w.join()


def _extensions_folder(code: str, backend: Backend, options: EvalOptions) -> Path | None:
    """The candidate's extensions folder; None when even that cannot be worked out (its build
    reports why)."""
    try:
        return locate(code, backend, options).extensions_dir
    except Exception:  # noqa: BLE001 - a hint for workers started ahead, never a verdict
        return None


def evaluate_many(items: Sequence[EvalItem], options: EvalOptions | None = None,
                  devices: Sequence[str] | None = None, compile_workers: int | None = None,
                  evaluator: Evaluator | None = None, lanes: int | None = None) -> list[EvalResult]:
    """`iter_evaluate`, collected: the same results, in input order."""
    results: list[EvalResult | None] = [None] * len(items)
    for i, result in iter_evaluate(items, options, devices, compile_workers, evaluator, lanes):
        results[i] = result
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """CLI; exit 0 whenever an evaluation was produced, 2 for bad arguments."""
    parser = CLIParser(prog="python -m feedback.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("problem", help="PROBLEM.py, or a spec naming one problem (suite:level1/19)")
    parser.add_argument("candidate", type=Path, help="the candidate's Python file")
    parser.add_argument("--backend", required=True, choices=["cuda", "triton", "cpp"])
    parser.add_argument("--size", help="size preset of the problem (e.g. small)")
    parser.add_argument("--json", action="store_true", help="print the EvalResult as one JSON object")
    parser.add_argument("--device", default="cuda:0", help="cuda:N (ignored by cpp)")
    parser.add_argument("--tolerance", choices=["fp64-relative", "kernelbench", "kernelbench-v0"])
    parser.add_argument("--profile", action="store_true", help="also run the profiler stage")
    parser.add_argument("--timing-trials", type=int, help="timed calls per program")
    parser.add_argument("--run-timeout", type=float, help="seconds per correctness/timing child")
    parser.add_argument("--cache-dir", type=Path, help="build and timing cache")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"cuda(:\d+)?|cpu", args.device):
        parser.error(f"--device must be cuda:N, got {args.device!r}")
    if not args.candidate.is_file():
        parser.error(f"no such candidate file: {args.candidate}")
    try:
        problems = select(args.problem)
    except SpecError as exc:
        parser.error(str(exc))
    if len(problems.problems) != 1:
        found = ", ".join(p.id for p in problems.problems) or "; ".join(problems.errors)
        parser.error(f"{args.problem!r} must name exactly one problem (found: {found or 'none'})")
    problem = problems.problems[0]
    if args.size and args.size != "default" and args.size not in problem.sizes:
        parser.error(f"{problem.id} has no size {args.size!r} (sizes: {', '.join(problem.sizes) or 'none'})")
    given = {"device": args.device, "size": args.size, "tolerance": args.tolerance,
             "profile": args.profile or None, "timing_trials": args.timing_trials,
             "run_timeout_s": args.run_timeout, "cache_dir": args.cache_dir}
    try:
        options = EvalOptions(**{k: v for k, v in given.items() if v is not None})
    except ValueError as e:  # pydantic's ValidationError: one line naming the flag
        parser.fail(e, flags={"timing_trials": "--timing-trials", "run_timeout_s": "--run-timeout"})
    result = evaluate(problem, args.candidate.read_text(), args.backend, options)
    print(result.model_dump_json() if args.json else result.summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
