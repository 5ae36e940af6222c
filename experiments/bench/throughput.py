"""Candidates fully evaluated per hour: this framework vs the stock path, on the same candidates.

    python -m experiments.bench.throughput RUN_DIR --problems ROOT --backend cuda [--out FILE.json]
    python -m experiments.bench.throughput experiments/bench/candidates/cpp \\
        --problems problems/suite --backend cpp --size small --no-compile-baseline   # CPU smoke

Input = KernelBench's own run layout, so KernelBench's arm can be measured on the very same
folder: RUN_DIR holds `level_{L}_problem_{P}_sample_{S}_kernel.py` files. The problem each one
answers is the file `level{L}/{P}_*.py` under ROOT, where ROOT is a KernelBench checkout (its
`KernelBench/` folder is found too), any folder holding `level1/ level2/ ...` (such as
`problems/suite`), or a single `levelN` folder. Files whose problem is missing are listed and skipped.

Arms (one run, side by side, framework first):
- `framework`: feedback.evaluate.evaluate_many on a cold cache (static screen, builds in a CPU
  pool with feedback.fastbuild, correctness, timing with baselines, profile with --profile);
  the precompiled headers the candidates need are built first (`pch_setup_s`: once per machine
  and flag set, not per candidate).
- `stock`: plain `load_inline`, no shared cache: every candidate built in its own fresh process
  and extensions folder by a pool of the same size, then evaluated one by one, each in a fresh
  process (KernelBench's tolerance; `--correct-trials` and `--timing-trials` calls).
Reported: candidates/hour (candidates / arm wall time), and seconds per stage.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.bench.child import run_build_child, run_stock_eval_child

KERNEL_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")


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


def framework_arm(candidates: list[dict], args: argparse.Namespace, cache: Path) -> dict:
    """evaluate_many over every candidate; PCH set-up timed separately."""
    from feedback import fastbuild
    from feedback.evaluate import evaluate_many  # written alongside; imported only when used
    from feedback.options import EvalOptions
    from problems.loaders import load_file

    options = EvalOptions(device=args.device, size=args.size, cache_dir=cache, profile=args.profile,
                          correctness_trials=args.correct_trials, timing_trials=args.timing_trials,
                          compile_baseline=args.compile_baseline, arch=args.arch)
    items = [(load_file(c["problem"]), c["file"].read_text(), args.backend) for c in candidates]
    start = time.monotonic()
    for _, code, backend in items:
        fastbuild.prepare(code, backend, cache)
    setup = time.monotonic() - start
    start = time.monotonic()
    results = evaluate_many(items, options, compile_workers=args.compile_workers)
    wall = time.monotonic() - start
    rows = [{"file": c["file"].name, "status": r.status.value, "stage": r.stage,
             "stage_seconds": r.stage_seconds} for c, r in zip(candidates, results)]
    stages = ("static", "compile", "correct", "timing", "profile")
    decisions = [json.loads(p.read_text()) for p in cache.glob("ext/*/*/kr_fastbuild.json")]
    return {"wall_s": round(wall, 1), "pch_setup_s": round(setup, 1), "rows": rows,
            "builds_with_pch": sum(bool(d.get("pch")) for d in decisions),
            "builds_seen": len(decisions),
            "stage_s": {s: _stats([r["stage_seconds"].get(s) for r in rows]) for s in stages}}


def stock_arm(candidates: list[dict], args: argparse.Namespace) -> dict:
    """Stock builds in a pool of fresh processes, then one fresh process per evaluation."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kr-stock-ext-") as tmp:
        exts = [Path(tmp) / f"c{i}" for i in range(len(candidates))]
        with ThreadPoolExecutor(args.compile_workers) as pool:
            builds = list(pool.map(lambda ce: run_build_child(ce[0]["file"], ce[1], None, args.arch),
                                   zip(candidates, exts)))
        compiled = time.monotonic() - start
        evals = [run_stock_eval_child(c["file"], c["problem"], ext_dir=ext, size=args.size,
                                      device=args.device, correct_trials=args.correct_trials,
                                      timing_trials=args.timing_trials, arch=args.arch)
                 if b["ok"] else None for c, ext, b in zip(candidates, exts, builds)]
    wall = time.monotonic() - start
    rows = []
    for c, b, e in zip(candidates, builds, evals):
        status = ("compile_error" if not b["ok"] else
                  "ok" if e and e.get("correct") else "error")
        rows.append({"file": c["file"].name, "status": status, "build_s": b["wall_s"],
                     "eval_process_s": e and e.get("process_s"),
                     "correct_s": e and e.get("correct_s"), "timing_s": e and e.get("timing_s"),
                     "error": b.get("error") or (e or {}).get("eval_error")})
    return {"wall_s": round(wall, 1), "compile_phase_s": round(compiled, 1),
            "eval_phase_s": round(wall - compiled, 1), "rows": rows,
            "stage_s": {"compile": _stats([r["build_s"] for r in rows]),
                        "correct": _stats([r["correct_s"] for r in rows]),
                        "timing": _stats([r["timing_s"] for r in rows]),
                        "eval_process": _stats([r["eval_process_s"] for r in rows])}}


def _stats(values: list[float | None]) -> dict[str, float | int | None]:
    xs = [v for v in values if v is not None]
    return {"n": len(xs), "sum": round(sum(xs), 2) if xs else None,
            "median": round(statistics.median(xs), 2) if xs else None}


def markdown(result: dict) -> str:
    """One row per arm: wall time, candidates/hour, statuses, median seconds per stage."""
    n = result["candidates"]
    lines = ["| arm | candidates | wall s | candidates/hour | ok | median s per stage |",
             "|---|---|---|---|---|---|"]
    for arm in ("framework", "stock"):
        data = result.get(arm)
        if not data:
            continue
        ok = sum(r["status"] == "ok" for r in data["rows"])
        per_hour = n / data["wall_s"] * 3600 if data["wall_s"] else 0
        stages = ", ".join(f"{k} {v['median']}" for k, v in data["stage_s"].items() if v["n"])
        lines.append(f"| {arm} | {n} | {data['wall_s']} | {per_hour:.0f} | {ok} | {stages} |")
    if result.get("framework"):
        fw = result["framework"]
        lines.append(f"\nframework: PCH set-up before the run (once per flag set) "
                     f"{fw['pch_setup_s']} s; builds that used a PCH: {fw['builds_with_pch']} "
                     f"of {fw['builds_seen']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="folder of level_L_problem_P_sample_S_kernel.py")
    parser.add_argument("--problems", type=Path, required=True,
                        help="KernelBench checkout, or a folder holding level1/ level2/ ...")
    parser.add_argument("--backend", choices=["cuda", "cpp"], default="cuda")
    parser.add_argument("--arms", default="framework,stock", help="comma list: framework, stock")
    parser.add_argument("--device", default=None, help="default: cuda:0, or cpu for cpp")
    parser.add_argument("--size", default=None, help="problem size preset (e.g. small)")
    parser.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST (default: detected)")
    parser.add_argument("--correct-trials", type=int, default=5)
    parser.add_argument("--timing-trials", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="framework: run the profile stage")
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false",
                        help="framework: skip the torch.compile baseline")
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="parallel builds in both arms (default: cores // 2)")
    parser.add_argument("--limit", type=int, default=None, help="first N candidates only")
    parser.add_argument("--out", type=Path, default=Path("throughput.json"))
    args = parser.parse_args(argv)
    import os

    args.device = args.device or ("cpu" if args.backend == "cpp" else "cuda:0")
    args.compile_workers = args.compile_workers or max(1, (os.cpu_count() or 2) // 2)
    candidates, skipped = find_candidates(args.run_dir, args.problems)
    candidates = candidates[: args.limit]
    if not candidates:
        parser.error(f"no candidates with problems in {args.run_dir} ({len(skipped)} skipped)")
    result: dict = {"candidates": len(candidates), "skipped": skipped, "backend": args.backend,
                    "command": " ".join(["python -m experiments.bench.throughput",
                                         *(argv if argv is not None else sys.argv[1:])]),
                    "cpus": os.cpu_count()}
    arms = args.arms.split(",")
    with tempfile.TemporaryDirectory(prefix="kr-throughput-cache-") as cache:
        if "framework" in arms:
            result["framework"] = framework_arm(candidates, args, Path(cache))
        if "stock" in arms:
            result["stock"] = stock_arm(candidates, args)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    print(markdown(result))
    for line in skipped:
        print(f"skipped {line}")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
