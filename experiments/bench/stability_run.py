"""Issue 15's measurement: the stability suite evaluated N times with builds alongside.

Called by `python -m experiments.bench.timing_stability` without a problem (see its docstring).
Per kernel: the median of each separate evaluation, their spread (max/min - 1), the noise each
evaluation reported about itself, and `do_bench` of the same build (GPU). Also the speedups'
spread, because a fast_p decision is made on the ratio, and the number of builds that finished
during the timed part (so "compiles alongside" is a measured fact, not a flag).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from experiments.bench.stability_suite import BuildLoad, kernels
from experiments.bench.timing_stability import spread

SHORT_OPTIONS = {"correctness_trials": 1, "timing_budget_s": 4.0, "warmup_s": 1.0,
                 "baselines": False}
"""`--short` (`make gpu-check`, ~100 s on the H200): one correctness trial (a job of its own, apart
from the timing: on the 1.7-ms ReLU's 6.4 GB of inputs each trial costs seconds), a shorter sampling
budget, and no eager baseline (a speedup's spread over evaluations is the candidate's alone when
the baseline is timed once and cached, as it is here: its timing cost ~20 s of run 15's 138 s);
the timing protocol is otherwise the evaluator's default."""


def _pct(value: float | None) -> float | None:
    return round(value * 100, 3) if value is not None else None


def run_suite(args: argparse.Namespace) -> int:
    from feedback.compile import compile_candidate, locate
    from feedback.evaluate import evaluate
    from feedback.job import standby_workers
    from feedback.options import EvalOptions
    from feedback.result import Status

    variants = args.variant or [("", {})]
    overrides = {name: over for name, over in variants}
    quick = {**(SHORT_OPTIONS if args.short else {}),
             **({"baselines": True} if args.kernelbench_eager else {})}
    try:
        per_variant = {name: EvalOptions(**{"compile_baseline": False, **quick, **over})
                       for name, over in variants}
    except ValueError as e:
        print(f"bad option override: {e}", file=sys.stderr)
        return 2
    options = next(iter(per_variant.values()))  # the build load's
    items = []
    try:
        chosen = kernels(args.backend, args.short, args.kernels)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    for k in chosen:
        problem, size = k.problem()
        for name, opts in per_variant.items():  # variants interleaved, each kernel its own row
            named = dataclasses.replace(k, name=f"{k.name}:{name}") if len(variants) > 1 else k
            items.append((named, problem, opts.model_copy(update={"size": size}),
                          k.code(args.backend)))
    with ThreadPoolExecutor(len(items)) as pool:  # built before the clock starts, in parallel
        builds = list(pool.map(lambda it: compile_candidate(it[1], it[3], args.backend, it[2]), items))
    for (k, *_), built in zip(items, builds):
        if built.status != Status.ok:
            print(f"{k.name}: does not build: {built.message[:500]}", file=sys.stderr)
            return 1
    workers = args.compiles if args.compiles is not None else max(1, (os.cpu_count() or 2) // 2)
    load = BuildLoad(workers, options).start() if workers else None
    rows: dict[str, list[dict]] = {k.name: [] for k, *_ in items}
    benches: dict[str, float | None] = {}
    kernelbench: dict[str, dict] = {}
    start, result = time.monotonic(), None

    def write(complete: bool) -> dict:
        """The record so far, written to --out at once: a run cut by a time limit keeps every
        evaluation that finished (`complete` false until do_bench has run too)."""
        env = result.environment.model_dump() if result and result.environment else {}
        finished = load.finished if load else 0
        record = {"date": datetime.date.today().isoformat(), "device": env.get("device"),
                  "complete": complete, "compiles_alongside": bool(finished),
                  "compile_workers": workers, "builds_finished_alongside": finished,
                  "build_failures": (load.failed if load else [])[:3],
                  "timed_seconds": round(time.monotonic() - start, 1), "backend": args.backend,
                  "short": args.short,
                  "command": " ".join(["python -m experiments.bench.timing_stability", *sys.argv[1:]]),
                  "options": overrides if len(variants) > 1 else variants[0][1],
                  "environment": env,
                  "kernels": [_kernel(k, problem, rows[k.name], benches.get(k.name), args.n,
                                      kernelbench.get(k.name))
                              for k, problem, *_ in items]}
        if args.out:
            args.out.write_text(json.dumps(record, indent=2))
        return record

    try:
        with standby_workers():  # as sweeps run them: the next job's worker starts early
            for i in range(args.n):
                for k, problem, opts, code in items:
                    result = evaluate(problem, code, args.backend, opts)
                    run = result.runtime
                    rows[k.name].append({"status": result.status.value,
                                         "median_ms": run.median_ms if run else None,
                                         "noise": result.noise, "speedup_eager": result.speedup_eager,
                                         "eager_ms": result.eager.median_ms if result.eager
                                         else None,
                                         "samples": run.n if run else None,
                                         "calls_per_sample": run.calls_per_sample if run else None,
                                         "sm_clock_mhz": run.sm_clock_mhz if run else None,
                                         "launch_ms": run.launch_ms if run else None,
                                         "tail_ms": run.tail_ms if run else None,
                                         "wake_ms": run.wake_ms if run else None})
                    row = rows[k.name][-1]
                    if args.do_bench_each and args.backend != "cpp":
                        row["do_bench_ms"] = _do_bench(problem, code, args.backend, opts, locate)
                    print(f"{k.name} run {i}: {result.status.value} median={row['median_ms']} "
                          f"ms noise={result.noise} speedup={result.speedup_eager} "
                          f"samples={row['samples']}x{row['calls_per_sample']} "
                          f"sm_clock={row['sm_clock_mhz']} MHz launch={row['launch_ms']} ms "
                          f"tail={row['tail_ms']} ms wake={row['wake_ms']} ms "
                          f"do_bench={row.get('do_bench_ms')} ms "
                          f"{result.message[:200]}", flush=True)
                    write(complete=False)
        timed_s = time.monotonic() - start
        if load:  # the standby workers are gone: the load's builds are this process's only children
            load.stop()
        for k, problem, opts, code in items:
            if args.backend != "cpp" and not args.no_do_bench:
                benches[k.name] = _do_bench(problem, code, args.backend, opts, locate)
                write(complete=False)
        for k, problem, opts, code in items:
            if args.backend != "cpp" and args.kernelbench_eager:
                kernelbench[k.name] = _kernelbench_eager(problem, opts)
                write(complete=False)
        record = write(complete=True)
    finally:
        if load:
            load.stop()
    for row in record["kernels"]:
        print(f"{row['name']}: median {row['median_ms']} ms, spread over {row['evaluations']} "
              f"evaluations {row['spread_pct']}%, do_bench {row['do_bench_ms']} ms; eager "
              f"{row['eager_ms']} ms, KernelBench's timing of it {row['kernelbench_eager_ms']} ms "
              f"({row['eager_agreement_pct']}%)")
    out = record["kernels"]
    worst = max((r["spread_pct"] for r in out if r["spread_pct"] is not None), default=None)
    print(f"builds finished alongside: {record['builds_finished_alongside']}; worst spread {worst}% "
          f"(target 1.5%); timed part {timed_s:.0f} s")
    return 0 if all(r["spread_pct"] is not None for r in out) else 1


def _kernel(k, problem, runs: list[dict], bench: float | None, n: int,
            kernelbench: dict | None = None) -> dict:
    """One kernel's figures from its evaluations so far (`kernelbench`: its problem's eager
    reference under KernelBench's timing, `_kernelbench_eager`)."""
    medians = [r["median_ms"] for r in runs if r["median_ms"]]
    eager = next((r["eager_ms"] for r in runs if r.get("eager_ms")), None)
    theirs = (kernelbench or {}).get("kernelbench_ms")
    speedups = [r["speedup_eager"] for r in runs if r["speedup_eager"]]
    median = sorted(medians)[len(medians) // 2] if medians else None
    benched = [r["do_bench_ms"] for r in runs if r.get("do_bench_ms")]
    return {"name": k.name, "problem": problem.id, "size": k.size or k.preset,
            "median_ms": median, "evaluations": len(medians),
            "spread_pct": _pct(spread(medians)) if len(medians) == n else None,
            "speedup_spread_pct": _pct(spread(speedups)) if len(speedups) == n else None,
            "do_bench_ms": bench,
            "do_bench_agreement_pct": _pct(median / bench - 1) if median and bench else None,
            "do_bench_each_ms": benched,
            "do_bench_each_spread_pct": _pct(spread(benched)) if len(benched) == n else None,
            "eager_ms": eager, "kernelbench_eager_ms": theirs,
            "kernelbench_eager": kernelbench,
            "eager_agreement_pct": _pct(eager / theirs - 1) if eager and theirs else None,
            "medians_ms": medians, "noise": [r["noise"] for r in runs], "runs": runs}


def _kernelbench_eager(problem, opts) -> dict:
    """KernelBench's timing of `problem`'s eager reference, in a child that holds the device's
    lock for its device work (experiments/bench/child.py)."""
    from experiments.bench.child import run_kernelbench_eager_child
    from feedback.evaluate import device_lock

    got = run_kernelbench_eager_child(problem.model_dump(), size=opts.size, device=opts.device,
                                      device_lock=device_lock(opts))
    if not got.get("ok"):
        print(f"KernelBench's eager timing failed: {got.get('error')}", file=sys.stderr)
    return got


def _do_bench(problem, code, backend, opts, locate) -> float | None:
    """do_bench of the evaluator's build of `code`, in a child that holds the device's lock for
    its device work (its process start and imports do not hold it)."""
    from pathlib import Path

    from experiments.bench.child import run_do_bench_child
    from feedback.evaluate import device_lock

    paths = locate(code, backend, opts)
    root = Path(opts.cache_dir).resolve()
    got = run_do_bench_child(paths.candidate, problem.model_dump(), ext_dir=paths.extensions_dir,
                             size=opts.size, device=opts.device, cache_dir=root,
                             device_lock=device_lock(opts))
    if got.get("do_bench_ms") is None:
        print(f"do_bench failed: {got.get('error') or got.get('eval_error')}", file=sys.stderr)
    return got.get("do_bench_ms")
