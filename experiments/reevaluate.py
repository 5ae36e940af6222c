"""`python -m experiments.reevaluate RUN_DIR --backend cuda [--out DIR] [--resume NEW_RUN_DIR]`.

Re-runs the evaluator on every stored kernel of a run, on this machine, with no LLM call, and
writes the results as a new run (same problems, indices, turns and candidates; new results and
provenance). Reporting both runs side by side is the paper's cross-hardware study: did the
speedups measured on one GPU hold on another? Kernels are evaluated one at a time, so no two
timings share the device, and each result is stored as soon as it exists: `--resume` continues.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agent.records import Attempt
from agent.store import RunStore, new_run_dir
from feedback.result import EvalResult
from problems.record import Problem

Evaluate = Callable[[Problem, str, str, object], EvalResult]
MACHINE_OPTIONS = {"device", "cache_dir", "arch", "profile"}


def _problems(spec: str, wanted: set[str]) -> dict[str, Problem]:
    """The source run's problems, by id; every stored problem must be found here."""
    from problems.spec import select

    found = {p.id: p for p in select(spec).problems}
    missing = sorted(wanted - set(found))
    if missing:
        raise ValueError(f"problems {missing[:5]} of the run are not in {spec!r} on this machine")
    return found


def _create(source: RunStore, backend: str, out: Path, size: str | None) -> RunStore:
    from agent.provenance import make_record

    old = source.record()
    path = new_run_dir(out, f"reeval-{backend}_{old.config.get('name') or old.run_id}")
    config = {**old.config, "backend": backend, "size": size, "reevaluated_from": str(source.path),
              "source_run_id": old.run_id}
    return RunStore.create(path, make_record(path.name, old.mode, config, old.template_hashes))


def reevaluate(source_dir: Path, backend: str, out: Path | None = None, *,
               resume: Path | None = None, size: str | None = None,
               evaluate: Evaluate | None = None) -> Path:
    """Evaluate every stored kernel of `source_dir` again; return the new run's directory.

    `size` defaults to the source run's; `evaluate` defaults to `feedback.evaluate.evaluate`.
    """
    from feedback.options import EvalOptions

    if evaluate is None:
        from feedback.evaluate import evaluate as local_evaluate

        evaluate = local_evaluate
    source = RunStore.open(source_dir)
    config = source.record().config
    size = size if size is not None else config.get("size")
    if resume is not None:
        target = RunStore.open(resume)
        stored = target.record().config
        if stored.get("source_run_id") != source.record().run_id or stored["backend"] != backend:
            raise ValueError(f"{resume} is not a {backend} re-evaluation of {source_dir}")
        size = stored.get("size")
    else:
        target = _create(source, backend, out or Path(source_dir).parent, size)
    attempts = source.attempts()
    problems = _problems(config.get("problems") or "", {a.candidate.problem_id for a in attempts})
    # The source run's evaluator settings (tolerance, trials...) keep the two runs comparable;
    # where things live on the old machine (device, cache) does not carry over.
    inherited = {k: v for k, v in (config.get("eval_options") or {}).items()
                 if k not in MACHINE_OPTIONS}
    options = EvalOptions(**{**inherited, "size": size})
    run_id, done = target.record().run_id, target.done_keys()
    for n, old in enumerate(attempts, 1):
        c = old.candidate
        if (c.problem_id, c.index, c.turn) in done:
            continue
        candidate = c.model_copy(update={"run_id": run_id})
        if c.code is None:
            target.write_attempt(Attempt(candidate=candidate, result=None))
            continue
        start = time.perf_counter()
        result = evaluate(problems[c.problem_id], c.code, backend, options)
        target.write_attempt(Attempt(candidate=candidate, result=result,
                                     gpu_seconds=time.perf_counter() - start))
        print(f"[{n}/{len(attempts)}] {c.problem_id} #{c.index} turn {c.turn}: "
              f"{result.status.value} (was {old.result.status.value if old.result else 'no_code'})",
              file=sys.stderr, flush=True)
    return target.path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.reevaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, metavar="RUN_DIR", help="The run whose kernels to re-run.")
    parser.add_argument("--backend", required=True, choices=["cuda", "triton", "cpp"])
    parser.add_argument("--size", help="Problem size preset (default: the source run's).")
    parser.add_argument("--out", type=Path, help="Folder for the new run (default: beside RUN_DIR).")
    parser.add_argument("--resume", type=Path, metavar="NEW_RUN_DIR",
                        help="Continue an interrupted re-evaluation of RUN_DIR.")
    args = parser.parse_args(argv)
    path = reevaluate(args.run, args.backend, args.out, resume=args.resume, size=args.size)
    print(f"re-evaluated run: {path}\ncompare: python -m experiments.report {args.run} {path} "
          "--out REPORT_DIR")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
