"""Candidates fully evaluated per hour: this framework vs the stock path, on the same candidates.

    python -m experiments.bench.throughput RUN_DIR --problems ROOT --backend cuda [--out FILE.json]
        [--arms framework,stock,ray] [--record docs/data/p2-h200.json] [--short]
    python -m experiments.bench.throughput experiments/bench/candidates/cpp \\
        --problems problems/suite --backend cpp --size small --no-compile-baseline   # CPU smoke

Input = KernelBench's own run layout, so KernelBench's arm can be measured on the very same
folder: RUN_DIR holds `level_{L}_problem_{P}_sample_{S}_kernel.py` files. The problem each one
answers is the file `level{L}/{P}_*.py` under ROOT, where ROOT is a KernelBench checkout (its
`KernelBench/` folder is found too), any folder holding `level1/ level2/ ...` (such as
`problems/suite`), or a single `levelN` folder. Files whose problem is missing are listed and skipped.

Arms (one run, side by side, in the order `--arms` gives, each on a cold cache):
- `framework`: feedback.evaluate.evaluate_many on a cold cache (static screen, builds in a CPU
  pool with feedback.fastbuild, correctness, timing with baselines, profile with --profile);
  the precompiled headers the candidates need are built first (`pch_setup_s`: once per machine
  and flag set, not per candidate; `--pch-from CACHE` copies them from a cache that has them,
  and leaves the arm's own there when it has none).
- `stock`: plain `load_inline`, no shared cache: every candidate built in its own fresh process
  and extensions folder by a pool of the same size, then evaluated one by one, each in a fresh
  process (KernelBench's tolerance; `--correct-trials` and `--timing-trials` calls).
- `baselined`: the framework arm on problems whose baselines are already measured (the
  refinement case: every turn after a problem's first): the baselines of every problem are timed
  into its cold cache first, `AHEAD_PROBLEMS` at once while the PCH set-up builds
  (`baseline_setup_s`, both outside its wall time), the candidates then build cold and are
  evaluated as in `framework`.
- `ray`: the framework arm again with `--executor ray` (a local Ray instance on this host,
  `feedback.ray_executor.RayEvaluator`), on a cold cache of its own, the same build pool size;
  `ray.init` is timed apart (`ray_init_s`), the stage actors' start is inside the wall time.
Reported: candidates/hour (candidates / arm wall time), seconds per stage, and whether the ray
arm gave the framework arm's verdicts; for a local framework arm also where the device's seconds
went (`device`: held alone, held shared only and by how many jobs, idle before and after the
first build finished; `jobs`: per job kind, its holds, waits for its worker and phases;
testlog.device_timeline and job_stats, from the job log `<out>.joblog.jsonl`), printed too.
`--record FILE` writes the issue-13 summary (`summary()`: date, device, candidates, problems,
per-hour figures of the three arms, median build seconds, device seconds per candidate), also at
the top level of `--out`. `--short` = the first `SHORT` candidates of distinct problems, no
torch.compile baseline, framework and stock arms unless `--arms` says otherwise
(`make gpu-check`). `--merge A.json B.json` combines the arms of separate
calls on the same candidates (one arm per call where a call may not last a whole run).
Each framework row keeps the medians its speed-ups came from (`ms`: candidate, eager,
compiled) and their timed samples (`samples`: a noisy program is sampled longer);
`--compare BEFORE AFTER` (results or `.progress.jsonl` files of two framework arms on the same
candidates) prints how AFTER's timed medians compare with BEFORE's
(throughput_report.timing_shift): an A/B of throughput also has to leave the timings alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.bench import cpuload
from experiments.bench.child import run_build_child, run_stock_eval_child
from experiments.bench.throughput_report import (
    ARMS,
    TIMED_PROGRAMS,
    differing_verdicts,
    markdown,
    merge,
    stage_stats,
    summary,
    timing_shift,
)
from experiments.bench.timing_stability import parse_overrides
from experiments.submissions import KERNEL_FILE
from problems.loaders import SUITE_ROOT

CANDIDATES = Path(__file__).parent / "candidates"

SHORT = 2
"""Candidates of `--short` (one per problem): two cold builds per arm fit `make gpu-check`."""


def find_candidates(run_dir: Path, problems_root: Path) -> tuple[list[dict], list[str]]:
    """(candidates with their problem file, files skipped with the reason)."""
    from problems.loaders import level_folders

    levels = {int(d.name[len("level"):]): d for d in level_folders(problems_root)}
    found, skipped = [], []
    for path in sorted(run_dir.iterdir()):
        match = KERNEL_FILE.match(path.name)
        if not match:
            continue
        level, number, sample = map(int, match.groups())
        folder = levels.get(level)
        problem = next(iter(sorted(folder.glob(f"{number}_*.py"))), None) if folder else None
        if problem is None:
            skipped.append(f"{path.name}: no level{level}/{number}_*.py under {problems_root}")
            continue
        found.append({"file": path, "problem": problem, "level": level, "number": number,
                      "sample": sample})
    return found, skipped


def one_per_problem(candidates: list[dict]) -> list[dict]:
    """The first candidate of each problem, in the folder's order."""
    seen: dict[Path, dict] = {}
    for c in candidates:
        seen.setdefault(c["problem"], c)
    return list(seen.values())


def arm_options(args: argparse.Namespace, cache: Path):
    """The framework arms' EvalOptions: the evaluator's defaults, the bench's flags, `--options`."""
    from feedback.options import EvalOptions

    return EvalOptions(**{"device": args.device, "size": args.size, "cache_dir": cache,
                          "profile": args.profile, "correctness_trials": args.correct_trials,
                          "compile_baseline": args.compile_baseline, "arch": args.arch,
                          **args.options})


def _leave_pch(made: Path, kept: Path) -> None:
    """Leave the precompiled headers an arm's set-up made at `kept` when nothing is there yet, so
    the next arm or call on this machine starts from them (`--pch-from`): whole or not at all."""
    if kept.exists() or not made.is_dir():
        return
    part = kept.with_name(f"{kept.name}.part-{os.getpid()}")
    shutil.copytree(made, part)
    try:
        part.rename(kept)
    except OSError:  # another arm left its own first
        shutil.rmtree(part, ignore_errors=True)


def framework_arm(candidates: list[dict], args: argparse.Namespace, cache: Path,
                  executor: str = "local", baselined: bool = False) -> dict:
    """evaluate_many over every candidate, on this machine or a local Ray instance; PCH set-up
    (and ray.init, and with `baselined` every problem's baselines) timed separately."""
    from feedback import fastbuild, fastbuild_nvcc
    from feedback.evaluate import AHEAD_PROBLEMS, LocalEvaluator, iter_evaluate
    from problems.loaders import load_file

    options = arm_options(args, cache)
    items = [(load_file(c["problem"]), c["file"].read_text(), args.backend) for c in candidates]
    evaluator, devices, extra = None, None, {}
    ahead = ThreadPoolExecutor(AHEAD_PROBLEMS)  # baselines on the device while the PCH builds
    problems = {item[0].id: item for item in items}.values() if baselined else []
    begun = time.monotonic()
    timed = [ahead.submit(LocalEvaluator().baselines, problem, backend, options)
             for problem, _, backend in problems]
    start = time.monotonic()
    if args.pch_from is not None and (args.pch_from / "pch").is_dir():
        shutil.copytree(args.pch_from / "pch", cache / "pch", dirs_exist_ok=True)
    for _, code, backend in items:
        fastbuild.prepare(code, backend, cache)
    setup = time.monotonic() - start
    if args.pch_from is not None:
        _leave_pch(cache / "pch", args.pch_from / "pch")
    failed = [f"{problem.id}: {future.exception()}" for future, (problem, _, _)
              in zip(timed, problems) if future.exception() is not None]
    ahead.shutdown()
    if baselined:  # a baseline that failed here is measured (and reported) by perform again
        extra["baseline_setup_s"] = round(time.monotonic() - begun, 1)
        extra["baseline_setup_failed"] = failed
        print(f"[baselined] baselines of {len(timed)} problems timed, {AHEAD_PROBLEMS} at once, "
              f"beside the PCH set-up: {extra['baseline_setup_s']} s (not in the arm's wall "
              "time)", flush=True)
    if executor == "ray":
        from feedback.ray_executor import RayEvaluator

        start = time.monotonic()
        evaluator = RayEvaluator(cache_dir=cache)
        extra["ray_init_s"] = round(time.monotonic() - start, 1)
        devices = [args.device] * evaluator.admission(args.backend).device_slots
    arm = "baselined" if baselined else "framework" if executor == "local" else executor
    cpu_log = args.out.with_suffix(f".{arm}.cpu.jsonl")
    sampler = cpuload.start(cpu_log)
    start, began = time.monotonic(), time.time()
    results: list = [None] * len(items)
    try:
        for i, r in iter_evaluate(items, options, devices, args.compile_workers, evaluator):
            results[i] = r
            progress(args, "baselined" if baselined else executor, start,
                     candidates[i]["file"].name, r)
    finally:
        if evaluator is not None:
            evaluator.close()
        cpuload.stop(sampler)
    wall = time.monotonic() - start
    extra["cpu"] = cpuload.summary(cpuload.read(cpu_log), os.cpu_count())
    rows = [{"problem": c["problem"].stem, **result_row(c["file"].name, r),
             "device": r.environment.device if r.environment else None}
            for c, r in zip(candidates, results)]
    decisions = [json.loads(p.read_text()) for p in cache.glob("ext/*/*/kr_fastbuild.json")]
    ninja = [fastbuild_nvcc.nvcc_line(str(p)) for p in cache.glob("ext/*/*/build.ninja")]
    if executor == "local":  # Ray's jobs run in its actors' processes, out of this job log
        from experiments.bench.testlog import device_timeline, job_stats

        logged = [json.loads(line) for line in Path(args.joblog).read_text().splitlines()]
        mine = [r for r in logged if r["began"] >= began]
        extra["device"] = device_timeline(mine)
        extra["jobs"] = job_stats(mine)
        extra["device_busy_s"] = extra["device"].get("busy_s", 0.0)
    return {"wall_s": round(wall, 1), "pch_setup_s": round(setup, 1), **extra, "rows": rows,
            "builds_with_pch": sum(bool(d.get("pch")) for d in decisions),
            "builds_seen": len(decisions),
            "builds_with_parallel_nvcc": sum(map(fastbuild_nvcc.runs_script, ninja)),
            "stage_s": stage_stats("framework", rows)}


def progress(args: argparse.Namespace, arm: str, start: float, name: str, result) -> None:
    """One line per finished candidate, printed and appended to `<out>.progress.jsonl`: a run cut
    at a time limit still says what finished, when, and where each candidate's time went."""
    row = {"arm": "framework" if arm == "local" else arm,
           "at_s": round(time.monotonic() - start, 1), **result_row(name, result)}
    print(f"[{row['arm']} {row['at_s']:7.1f}s] {name}: {row['status']} "
          + " ".join(f"{k} {v:.1f}" for k, v in row["stage_seconds"].items()), flush=True)
    with open(args.out.with_suffix(".progress.jsonl"), "a") as log:
        log.write(json.dumps(row) + "\n")


def result_row(name: str, result) -> dict:
    """A candidate's verdict, where its time went, the timed medians (`ms`, ms per call) of the
    programs its speed-ups came from and how many timed samples each took (`samples`: sampling
    stops once the median's standard error is within `timing_se`, so a noisy program holds the
    device for up to MAX_TRIALS of them) and each program's timing statistics (`timing`: its
    samples in the order taken, its passes' medians, noise and SM clocks)."""
    stats = [(program, s) for program, field in TIMED_PROGRAMS
             if (s := getattr(result, field)) is not None]
    return {"file": name, "status": result.status.value, "stage": result.stage,
            "stage_seconds": {k: round(v, 2) for k, v in result.stage_seconds.items()},
            "ms": {program: s.median_ms for program, s in stats},
            "samples": {program: s.n for program, s in stats},
            "timing": {program: s.model_dump(exclude_none=True) for program, s in stats},
            "message": result.message[:500] if result.status.value != "ok" else ""}


def framework_rows(path: Path) -> list[dict]:
    """A framework arm's rows from its result (`--out`) or its `.progress.jsonl` (a cut run)."""
    text = path.read_text()
    if path.name.endswith(".jsonl"):
        return [r for r in map(json.loads, text.splitlines()) if r["arm"] == "framework"]
    rows = (json.loads(text).get("framework") or {}).get("rows")
    if rows is None:
        raise ValueError(f"{path} has no framework arm")
    return rows


def stock_arm(candidates: list[dict], args: argparse.Namespace) -> dict:
    """Stock builds in a pool of fresh processes, then one fresh process per evaluation."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kr-stock-ext-") as tmp:
        exts = [Path(tmp) / f"c{i}" for i in range(len(candidates))]
        with ThreadPoolExecutor(args.compile_workers) as pool:
            builds = list(pool.map(lambda ce: run_build_child(ce[0]["file"], ce[1], None, args.arch),
                                   zip(candidates, exts)))
        compiled = time.monotonic() - start
        print(f"[stock {compiled:7.1f}s] builds done: {sum(b['ok'] for b in builds)} of "
              f"{len(builds)} built", flush=True)
        evals = []
        for c, ext, b in zip(candidates, exts, builds):
            evals.append(run_stock_eval_child(
                c["file"], c["problem"], ext_dir=ext, size=args.size, device=args.device,
                correct_trials=args.correct_trials, timing_trials=args.timing_trials,
                arch=args.arch) if b["ok"] else None)
            print(f"[stock {time.monotonic() - start:7.1f}s] {c['file'].name}: "
                  f"{'correct' if evals[-1] and evals[-1].get('correct') else 'not correct'}",
                  flush=True)
    wall = time.monotonic() - start
    rows = []
    for c, b, e in zip(candidates, builds, evals):
        status = ("compile_error" if not b["ok"] else
                  "ok" if e and e.get("correct") else "error")
        rows.append({"file": c["file"].name, "problem": c["problem"].stem, "status": status,
                     "build_s": b["wall_s"],
                     "eval_process_s": e and e.get("process_s"),
                     "correct_s": e and e.get("correct_s"), "timing_s": e and e.get("timing_s"),
                     "error": b.get("error") or (e or {}).get("eval_error")})
    return {"wall_s": round(wall, 1), "compile_phase_s": round(compiled, 1),
            "eval_phase_s": round(wall - compiled, 1), "rows": rows,
            "stage_s": stage_stats("stock", rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, nargs="?",
                        help="folder of level_L_problem_P_sample_S_kernel.py (default: "
                        "experiments/bench/candidates/BACKEND)")
    parser.add_argument("--problems", type=Path,
                        help="KernelBench checkout, or a folder holding level1/ level2/ ... "
                        "(default: problems/suite)")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="OUT.json",
                        help="no run: combine the arms of earlier outputs on the same candidates "
                        "(one arm per call, where a call may not last a whole run) into --out")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                        help="how AFTER's timed medians compare with BEFORE's (results or "
                        ".progress.jsonl files of two framework arms); runs nothing")
    parser.add_argument("--backend", choices=["cuda", "cpp"], default="cuda")
    parser.add_argument("--arms", default=None,
                        help=f"comma list of {', '.join(ARMS)} (default: all; "
                        "--short: framework,stock)")
    parser.add_argument("--device", default=None, help="default: cuda:0, or cpu for cpp")
    parser.add_argument("--size", default=None, help="problem size preset (e.g. small)")
    parser.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST (default: detected)")
    parser.add_argument("--correct-trials", type=int, default=5)
    parser.add_argument("--timing-trials", type=int, default=100,
                        help="the stock arm's timed calls (KernelBench's 100); the framework arm "
                             "takes the evaluator's own default samples")
    parser.add_argument("--profile", action="store_true", help="framework: run the profile stage")
    parser.add_argument("--options", type=parse_overrides, default={}, metavar="KEY=VALUE,...",
                        help="framework arms: EvalOptions overrides (e.g. timing_trials=10), "
                        "for an A/B of the evaluator's defaults")
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false",
                        help="framework: skip the torch.compile baseline")
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="parallel builds in both arms (default: cores // 2)")
    parser.add_argument("--limit", type=int, default=None, help="first N candidates only")
    parser.add_argument("--part", default=None, metavar="K/N",
                        help="the K-th of N parts of near-equal work (part_of), where one call "
                        "cannot run a whole arm; --merge joins the parts")
    parser.add_argument("--short", action="store_true",
                        help=f"the first {SHORT} candidates of distinct problems, no "
                        "torch.compile baseline (make gpu-check)")
    parser.add_argument("--pch-from", type=Path, default=None, metavar="CACHE",
                        help="framework arms: start from the precompiled headers of this cache "
                        "(a machine's one-time set-up, outside the per-hour figure either way), "
                        "and leave the set-up's there when it has none, for the next arm or "
                        "call; the candidates still build cold")
    parser.add_argument("--out", type=Path, default=Path("throughput.json"))
    parser.add_argument("--record", type=Path, default=None,
                        help="also write the summary record here (e.g. docs/data/p2-h200.json)")
    args = parser.parse_args(argv)
    args.device = args.device or ("cpu" if args.backend == "cpp" else "cuda:0")
    args.compile_workers = args.compile_workers or max(1, (os.cpu_count() or 2) // 2)
    arms = (args.arms or ("framework,stock" if args.short else ",".join(ARMS))).split(",")
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        parser.error(f"--arms: unknown arm(s) {', '.join(unknown)}; choose from "
                     f"{', '.join(ARMS)}")
    if args.compare:
        try:
            shift = timing_shift(*map(framework_rows, args.compare))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--compare: {exc!r}")
        print(json.dumps(shift, indent=1) if shift else
              "--compare: no candidate is ok with timed medians in both (rows from before "
              "the `ms` key have none)")
        return 0 if shift else 1
    if args.merge:
        try:
            return write(merge([json.loads(p.read_text()) for p in args.merge]), args)
        except (OSError, ValueError) as exc:
            parser.error(f"--merge: {exc}")
    if args.options:
        from pydantic import ValidationError
        try:
            arm_options(args, Path(tempfile.gettempdir()))
        except ValidationError as exc:
            parser.error(f"--options: {exc}")
    args.run_dir = args.run_dir or CANDIDATES / args.backend
    args.problems = args.problems or SUITE_ROOT
    if args.short:
        args.compile_baseline = False
    if not args.run_dir.is_dir():
        parser.error(f"run_dir: no such folder: {args.run_dir}")
    candidates, skipped = find_candidates(args.run_dir, args.problems)
    if args.short:
        candidates = one_per_problem(candidates)[:SHORT]
    candidates = candidates[: args.limit]
    part = None
    if args.part:
        try:
            part = _part(args.part, len(candidates))
        except ValueError as exc:
            parser.error(f"--part: {exc}")
        candidates = part_of(candidates, *part, size=args.size)
    if not candidates:
        parser.error(f"no candidates with problems in {args.run_dir} ({len(skipped)} skipped)")
    result: dict = {"date": time.strftime("%Y-%m-%d", time.gmtime()),
                    "candidates": len(candidates),
                    "problems": len({c["problem"] for c in candidates}), "skipped": skipped,
                    "backend": args.backend,
                    "command": " ".join(["python -m experiments.bench.throughput",
                                         *(argv if argv is not None else sys.argv[1:])]),
                    "cpus": os.cpu_count(), "options": args.options}
    if part:
        result["part"] = list(part)
    # each device job's wait and holds, as it ends: the device's busy seconds come from there
    from experiments.bench.testlog import trace_jobs

    args.joblog = os.environ.get("KERNEL_REFINE_JOBLOG") or str(args.out.with_suffix(".joblog.jsonl"))
    Path(args.joblog).touch()
    untrace = trace_jobs(args.joblog)
    try:
        for arm in arms:  # framework first, each on a cold cache of its own
            with tempfile.TemporaryDirectory(prefix=f"kr-throughput-{arm}-") as cache:
                result[arm] = (stock_arm(candidates, args) if arm == "stock" else
                               framework_arm(candidates, args, Path(cache),
                                             "ray" if arm == "ray" else "local",
                                             baselined=arm == "baselined"))
    finally:
        untrace()
    return write(result, args)


def _part(text: str, total: int) -> tuple[int, int]:
    """`K/N` -> (K, N), checked against `total` candidates."""
    k, sep, n = text.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n) <= max(total, 1)):
        raise ValueError(f"{text!r} is not K/N with 1 <= K <= N <= {total} (the candidates)")
    return int(k), int(n)


def part_of(candidates: list[dict], k: int, n: int, size: str | None = None) -> list[dict]:
    """The K-th of N parts, in the folder's order. Largest first, by their problem's input
    elements (the stock arm draws its inputs on the CPU, so they set its seconds), each candidate
    goes to the part with the least so far among those not yet full: the parts hold about equal
    work, and their sizes differ by at most one, so N parts of whole build rounds build in as
    many rounds as one arm. A problem whose inputs are unknown on the meta device counts as
    empty."""
    from problems.inputs import meta_inputs
    from problems.loaders import load_file

    def elements(c: dict) -> int:
        try:
            return sum(x.numel() for x in meta_inputs(load_file(c["problem"]), size)
                       if hasattr(x, "numel"))
        except Exception:  # noqa: BLE001 - the estimate only orders the dealing
            return 0

    weights = [elements(c) for c in candidates]
    room = [len(candidates) // n + (i < len(candidates) % n) for i in range(n)]
    load, members = [0] * n, [set() for _ in range(n)]
    for i in sorted(range(len(candidates)), key=lambda i: (-weights[i], i)):
        to = min((p for p in range(n) if len(members[p]) < room[p]), key=lambda p: (load[p], p))
        members[to].add(i)
        load[to] += weights[i]
    return [c for i, c in enumerate(candidates) if i in members[k - 1]]


def write(result: dict, args: argparse.Namespace) -> int:
    """Summary and verdict comparison added; written to --out (and --record); printed."""
    result["summary"] = summary(result)
    result.update(result["summary"])  # also at the top, where make gpu-check reads them
    result["ray_verdicts_differ"] = differing_verdicts(result)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    if args.record:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(result["summary"], indent=1) + "\n")
    print(markdown(result))
    print(json.dumps(result["summary"]))
    for line in result.get("skipped", []):
        print(f"skipped {line}")
    print(f"\nwrote {args.out}" + (f" and {args.record}" if args.record else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
