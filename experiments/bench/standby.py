"""Workers started ahead of their jobs (`feedback.job.standby_workers`) vs one fresh process per job.

    python -m experiments.bench.standby RUN_DIR --problems ROOT --backend cuda [--rounds 2]
    python -m experiments.bench.standby experiments/bench/candidates/cpp --problems problems/suite \\
        --backend cpp --size small --copies 3      # CPU: standby forced on for cpp jobs

RUN_DIR is in KernelBench's run layout (as for throughput.py). Every candidate is built first
(untimed: this measures the device side only), then the arms alternate round by round, each
evaluating the whole list with `evaluate_many` (correctness, timing of candidate and baselines;
baselines come from the reference-timing cache after the first round). Reported per arm: wall
seconds per candidate (median over rounds) and how many jobs a standby worker served.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--problems", type=Path, required=True, help="folder of levelN/ folders")
    parser.add_argument("--backend", default="cuda", choices=["cuda", "triton", "cpp"])
    parser.add_argument("--size", default=None)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per arm (alternating)")
    parser.add_argument("--copies", type=int, default=1,
                        help="evaluate each candidate this many times per round")
    parser.add_argument("--timing-trials", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from experiments.bench.throughput import find_candidates
    from feedback.evaluate import evaluate_many
    from feedback.job import standby_served, standby_workers
    from feedback.options import EvalOptions
    from problems.loaders import load_file

    found, skipped = find_candidates(args.run_dir, args.problems)
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    if not found:
        print(f"no candidates in {args.run_dir}", file=sys.stderr)
        return 2
    items = [(load_file(c["problem"]), c["file"].read_text(), args.backend)
             for c in found] * args.copies
    options = EvalOptions(size=args.size, timing_trials=args.timing_trials, compile_baseline=False)
    evaluate_many(items[:len(found)], options.model_copy(update={"time": False}))  # builds, untimed
    arms: dict[str, list[float]] = {"fresh": [], "standby": []}
    served: dict[str, int] = {"fresh": 0, "standby": 0}
    statuses: dict[str, list[str]] = {}
    for r in range(args.rounds):
        for arm in arms:
            before, start = standby_served(), time.monotonic()
            with standby_workers(cpu=True) if arm == "standby" else contextlib.nullcontext():
                results = evaluate_many(items, options)
            arms[arm].append((time.monotonic() - start) / len(items))
            served[arm] += standby_served() - before
            statuses[arm] = [res.status.value for res in results]
            print(f"round {r} {arm}: {arms[arm][-1]:.2f} s per candidate "
                  f"({standby_served() - before} jobs from standby workers)", flush=True)
    rows = {arm: {"s_per_candidate": statistics.median(v), "rounds": v, "standby_jobs": served[arm],
                  "statuses": statuses[arm]} for arm, v in arms.items()}
    print("\n| arm | s per candidate (median of rounds) | jobs served by a standby worker |")
    print("|---|---|---|")
    for arm, row in rows.items():
        print(f"| {arm} | {row['s_per_candidate']:.2f} | {row['standby_jobs']} |")
    if args.out:
        args.out.write_text(json.dumps({"candidates": len(items), "backend": args.backend,
                                        "size": args.size, "arms": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
