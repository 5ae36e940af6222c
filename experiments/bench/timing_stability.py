"""Timing stability: the same kernel evaluated N times, each a separate evaluation.

Prints each evaluation's candidate median (and the GPU's SM clock before and after its timed
calls) and the spread max/min - 1 of the medians: the figure issue 3 asks for (<= 1.5% for an
honest memory-bound kernel on an H200).

    python -m experiments.bench.timing_stability suite:level1/19 \
        experiments/bench/candidates/cuda/level_1_problem_19_sample_0_kernel.py --backend cuda -n 5

`--variant NAME:KEY=VALUE,...` adds a set of option overrides; the variants' evaluations are
interleaved (A B A B ...) so that drift over the run (GPU temperature, other load) affects each
variant alike, and each variant gets its own spread; in the suite form each kernel then gets a row
per variant (`NAME:VARIANT`), with the same builds alongside.

Without PROBLEM and CANDIDATE it is issue 15's measurement: the kernels of stability_suite.py
(`--short`: three, one under 0.15 ms on the H200), each evaluated N times (interleaved), while
`--compiles` real builds run alongside through the evaluator's build path; then each kernel once
under `triton.testing.do_bench` (GPU), for the agreement check (`--kernelbench-eager`: the eager
reference as well, the evaluator's median against KernelBench's own timing, experiments/bench/
child.py). `--do-bench-each`: do_bench after
every evaluation as well, with the builds still running, and its spread beside the evaluator's:
where both move together between evaluations the device changed; where only the evaluator's
medians move, its timed window (host time inside it) did. `--out` gets the shape of
docs/data/p3-h200.json:

    python -m experiments.bench.timing_stability --backend cuda --short -n 3 --out p3.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def parse_overrides(text: str, where: str = "") -> dict[str, str]:
    """`key=value,key=value` (EvalOptions fields; pydantic converts the values)."""
    overrides = {}
    for item in filter(None, text.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise argparse.ArgumentTypeError(f"{item!r}{where} is not KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """`name:key=value,key=value` (or `name` alone: the defaults)."""
    name, _, rest = text.partition(":")
    return name, parse_overrides(rest, f" in variant {name!r}")


def spread(medians: list[float]) -> float | None:
    """max/min - 1 of the medians; None when there are fewer than two."""
    return max(medians) / min(medians) - 1 if len(medians) >= 2 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("problem", nargs="?", help="problem spec or file (none: the suite)")
    parser.add_argument("candidate", nargs="?", type=Path)
    parser.add_argument("--short", action="store_true", help="suite: the three-kernel form")
    parser.add_argument("--kernels", type=lambda t: [n for n in t.split(",") if n], default=None,
                        metavar="NAME,...", help="suite: these kernels of stability_suite.py "
                        "(default: all; --short: three)")
    parser.add_argument("--compiles", type=int, default=None,
                        help="suite: builds kept running alongside (default: half the cores)")
    parser.add_argument("--no-do-bench", action="store_true", help="suite: skip do_bench")
    parser.add_argument("--do-bench-each", action="store_true",
                        help="suite: do_bench after every evaluation too, builds still running "
                             "(does a shift between evaluations show in do_bench's clock as well?)")
    parser.add_argument("--kernelbench-eager", action="store_true",
                        help="suite (GPU): time the eager reference too (the evaluator's eager "
                             "baseline, on), then each kernel's problem under KernelBench's own "
                             "timing, for the 5%% agreement of the evaluator's eager median")
    parser.add_argument("--backend", default="cuda", choices=["cuda", "triton", "cpp"])
    parser.add_argument("-n", type=int, default=None,
                        help="separate evaluations per variant (default 5; --short: 3)")
    parser.add_argument("--size", default=None)
    parser.add_argument("--variant", type=parse_variant, action="append", default=None,
                        help="NAME:KEY=VALUE,... option overrides (repeatable); default: the "
                             "evaluator's defaults only")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args(argv)

    args.n = args.n or (3 if args.short else 5)
    if args.problem is None:
        from experiments.bench.stability_run import run_suite

        return run_suite(args)
    from feedback.evaluate import evaluate
    from feedback.options import EvalOptions
    from problems.spec import select

    problems = select(args.problem).problems
    if len(problems) != 1:
        print(f"{args.problem!r} selects {len(problems)} problems; give exactly one", file=sys.stderr)
        return 2
    problem, code = problems[0], args.candidate.read_text()
    variants = args.variant or [("defaults", {})]
    try:
        options = {name: EvalOptions(**{"size": args.size, "compile_baseline": False, **over})
                   for name, over in variants}
    except ValueError as e:
        print(f"bad option override: {e}", file=sys.stderr)
        return 2
    rows, result = [], None
    for i in range(args.n):
        for name, _ in variants:
            result = evaluate(problem, code, args.backend, options[name])
            run = result.runtime
            rows.append({"variant": name, "run": i, "status": result.status.value,
                         "median_ms": run.median_ms if run else None, "noise": result.noise,
                         "sm_clock_mhz": run.sm_clock_mhz if run else None,
                         "speedup_eager": result.speedup_eager,
                         "seconds": sum(result.stage_seconds.values())})
            print(f"{name} run {i}: {result.status.value} median={rows[-1]['median_ms']} ms "
                  f"noise={result.noise} sm_clock={rows[-1]['sm_clock_mhz']} MHz "
                  f"speedup_eager={result.speedup_eager} ({rows[-1]['seconds']:.1f} s) "
                  f"{result.message[:200]}", flush=True)
    summary = {}
    for name, over in variants:
        medians = [r["median_ms"] for r in rows if r["variant"] == name and r["median_ms"]]
        s = spread(medians) if len(medians) == args.n else None
        summary[name] = {"options": over, "spread": s, "medians": medians}
        print(f"{name} {over}: spread (max/min of medians - 1) over {len(medians)} evaluations: "
              + (f"{s * 100:.2f}%" if s is not None else "not measured (a run failed)"))
    env = result.environment.model_dump() if result and result.environment else {}
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "variants": summary, "environment": env},
                                       indent=2))
    return 0 if all(v["spread"] is not None for v in summary.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
