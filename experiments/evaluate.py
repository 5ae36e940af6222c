"""`python -m experiments.evaluate SOURCE --problems ROOT --backend cuda|triton|cpp --out RUN_DIR`.

Re-scores kernels written elsewhere (another harness's generations) with this evaluator. SOURCE is
a folder in KernelBench's run layout (`level_L_problem_P_sample_S_kernel.py`) or a JSONL file of
`{"problem": ..., "kernel": ...}` lines (`experiments/submissions.py`); ROOT is any problem spec
(a KernelBench checkout, `problems/suite`, `suite:level1`...). Builds run in a CPU pool while
one worker per device (`--devices cuda:0,cuda:1`) or the Ray cluster's stage actors
(`--executor ray`) check and time them (`feedback.evaluate.iter_evaluate`). Each result is
stored in RUN_DIR as soon as it exists: a sampling run (index = sample S, turn 0) that
`experiments.report` reads. Killed and called again with the same RUN_DIR, it evaluates only
what is not stored yet (a kernel whose code changed since is evaluated again).

Exit codes: 0 every kernel stored; 2 bad input (one line on stderr, nothing evaluated); 130
interrupted (what finished is stored; the same command continues).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pydantic import ValidationError

from agent.records import Attempt, Candidate
from agent.store import RunStore
from experiments.submissions import Submission, SubmissionError, read_submissions
from problems.cli import CLIParser
from problems.loaders import SUITE_ROOT
from problems.record import Problem

MODE = "sample"
MATCHED = ("source", "backend", "size", "eval_options")
"""Config keys a second call on the same RUN_DIR must agree on (the rest may change)."""
DEVICE_STAGES = ("correct", "timing", "profile")


@dataclass(frozen=True)
class Rescored:
    """What one call did."""

    path: Path
    total: int
    skipped: int
    evaluated: int


def problem_spec(problems: Sequence[Problem], given: str) -> str:
    """A spec naming exactly these problems (what `experiments.runs` expects), portable for the
    suite's; `given` when some problem has no file of its own (parquet rows)."""
    items = []
    for p in problems:
        path = p.origin_path
        if path is None:
            return given
        path = path.resolve()
        inside = path.is_relative_to(SUITE_ROOT.resolve())
        items.append(f"suite:level{p.level}/{p.number}" if inside else str(path))
    return ",".join(items)


def _config(source: Path, submissions: list[Submission], spec: str, backend: str,
            size: str | None, eval_options: dict[str, Any], executor: str) -> dict[str, Any]:
    problems = list({s.problem.id: s.problem for s in submissions}.values())
    return {"name": f"rescore_{source.stem}", "model": f"rescore:{source.resolve()}",
            "source": str(source.resolve()), "problems": problem_spec(problems, spec),
            "backend": backend, "size": size, "eval_options": eval_options,
            "k": 1 + max(s.index for s in submissions), "executor": executor}


def _open_store(out: Path, config: dict[str, Any]) -> RunStore:
    """RUN_DIR as given: created, or (a second call) checked and its config refreshed."""
    from agent.provenance import make_record

    if (out / "config.json").exists():
        stored = RunStore.open(out).record()
        clash = [f"{k} {stored.config.get(k)!r} (now {config[k]!r})" for k in MATCHED
                 if stored.mode != MODE or stored.config.get(k) != config[k]]
        if clash:
            raise SubmissionError(f"{out} holds another evaluation ({'; '.join(clash)}); give "
                                  "another --out")
        return RunStore.create(out, stored.model_copy(update={"config": config}))
    return RunStore.create(out, make_record(out.name, MODE, config, {}))


def _attempt(run_id: str, s: Submission, model: str, result) -> Attempt:
    candidate = Candidate(problem_id=s.problem.id, run_id=run_id, index=s.index, turn=0,
                          model=model, template_hash="", response="", code=s.code)
    device_s = sum(result.stage_seconds.get(k, 0.0) for k in DEVICE_STAGES)
    return Attempt(candidate=candidate, result=result, gpu_seconds=device_s)


def rescore(source: Path, problems: str, backend: str, out: Path, *, size: str | None = None,
            eval_options: dict[str, Any] | None = None, devices: Sequence[str] | None = None,
            executor: str = "local", ray_address: str | None = None,
            compile_workers: int | None = None, progress: bool = True,
            on_stored: Callable[[Attempt], None] | None = None) -> Rescored:
    """Evaluate every kernel of `source` not yet stored in `out`; raises SubmissionError (or
    problems.spec.SpecError, feedback.executor.ExecutorError) for bad input before any work.
    `on_stored` is called after each write (tests interrupt a run there)."""
    from agent.progress import RunProgress
    from feedback.cache import code_hash
    from feedback.evaluate import iter_evaluate
    from feedback.executor import check_executor, make_evaluator
    from feedback.options import EvalOptions
    from problems.spec import select

    check_executor(executor, ray_address)
    eval_options = dict(eval_options or {})
    options = EvalOptions(**{**eval_options, "size": size})
    selected = select(problems).problems
    submissions = read_submissions(Path(source), selected)
    for s in submissions:
        if size and size != "default" and size not in s.problem.sizes:
            raise SubmissionError(f"{s.problem.id} has no size {size!r} (sizes: "
                                  f"{', '.join(s.problem.sizes) or 'none'})")
    config = _config(Path(source), submissions, problems, backend, size, eval_options, executor)
    store = _open_store(Path(out), config)
    run_id = store.record().run_id
    stored = {(a.candidate.problem_id, a.candidate.index): a.result.code_hash
              for a in store.attempts() if a.result is not None}
    todo = [s for s in submissions
            if stored.get((s.problem.id, s.index)) != code_hash(s.code)]
    evaluator = make_evaluator(executor, ray_address) if todo else None
    if executor == "ray" and evaluator is not None:
        devices = [options.device] * evaluator.admission(backend).device_slots
    elif backend == "cpp":
        devices = ["cpu"]
    items = [(s.problem, s.code, backend) for s in todo]
    done = len(submissions) - len(todo)
    try:
        with RunProgress(len(submissions), enabled=progress, done=done, label="kernels") as bar, \
                closing(iter_evaluate(items, options, devices, compile_workers,
                                      evaluator)) as results:
            for i, result in results:
                attempt = _attempt(run_id, todo[i], config["model"], result)
                store.write_attempt(attempt)
                bar.step(f"{todo[i].problem.id} #{todo[i].index}  {result.status.value}")
                if on_stored is not None:
                    on_stored(attempt)
    finally:
        if evaluator is not None and hasattr(evaluator, "close"):
            evaluator.close()
    return Rescored(store.path, len(submissions), done, len(todo))


def print_summary(outcome: Rescored) -> None:
    """Statuses and fast_p of what the store now holds (the same table `agent.sample` prints)."""
    from collections import Counter

    from rich.console import Console

    from agent.progress import sample_table

    store = RunStore.open(outcome.path)
    config = store.record().config
    attempts = store.attempts()
    console = Console(soft_wrap=True)
    problems = len({a.candidate.problem_id for a in attempts})
    console.print(sample_table(store.trajectories(), problems, config["k"]))
    counts = Counter(a.result.status.value if a.result else "no_code" for a in attempts)
    console.print(", ".join(f"{k} {v}" for k, v in sorted(counts.items())), highlight=False)
    console.print(f"{outcome.evaluated} evaluated now, {outcome.skipped} already stored; "
                  f"run stored in {outcome.path}; report: python -m experiments.report "
                  f"{outcome.path} --out REPORT_DIR", highlight=False)


def make_parser() -> CLIParser:
    parser = CLIParser(prog="python -m experiments.evaluate", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, metavar="SOURCE",
                        help="Folder of level_L_problem_P_sample_S_kernel.py, or a JSONL file.")
    parser.add_argument("--problems", required=True, metavar="ROOT",
                        help="The problems the kernels answer: a KernelBench checkout, a folder "
                        "of levelN/ folders, or any problem spec (suite:level1, ...).")
    parser.add_argument("--backend", required=True, choices=["cuda", "triton", "cpp"])
    parser.add_argument("--out", required=True, type=Path, metavar="RUN_DIR",
                        help="The run directory; the same RUN_DIR again continues.")
    parser.add_argument("--size", help="Problem size preset (e.g. small).")
    parser.add_argument("--eval-option", dest="eval_options", action="append", metavar="K=V",
                        help="Evaluator option (feedback.options.EvalOptions field), repeatable.")
    parser.add_argument("--devices", help="Comma list of devices, one worker each (cuda:0,cuda:1).")
    parser.add_argument("--executor", default="local", choices=["local", "ray"])
    parser.add_argument("--ray-address", metavar="auto|HOST:PORT")
    parser.add_argument("--compile-workers", type=int, help="Parallel builds (default: cores//2).")
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    return parser


def parse_args(parser: CLIParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    if args.devices is not None:
        args.devices = [d.strip() for d in args.devices.split(",")]
        bad = [d for d in args.devices if not _is_device(d)]
        if bad or not args.devices:
            parser.error(f"--devices: expected cuda:N[,cuda:M...], got {args.devices!r}")
    if args.compile_workers is not None and args.compile_workers < 1:
        parser.error(f"--compile-workers: must be at least 1, got {args.compile_workers}")
    return args


def _is_device(name: str) -> bool:
    import re

    return re.fullmatch(r"cuda:\d+|cpu", name) is not None


def main(argv: Sequence[str] | None = None) -> int:
    from agent.llm import parse_llm_args
    from feedback.options import EvalOptions
    from problems.spec import SpecError

    parser = make_parser()
    args = parse_args(parser, argv)
    try:
        eval_options = parse_llm_args(args.eval_options)
        outcome = rescore(args.source, args.problems, args.backend, args.out, size=args.size,
                          eval_options=eval_options, devices=args.devices,
                          executor=args.executor, ray_address=args.ray_address,
                          compile_workers=args.compile_workers, progress=args.progress)
    except ValidationError as e:  # an --eval-option value: named as the user typed it
        parser.fail(e, flags=lambda field: f"--eval-option {field}",
                    known=EvalOptions.model_fields)
    except SpecError as e:
        parser.fail(ValueError(f"--problems: {e}"))
    except (SubmissionError, ValueError, FileExistsError) as e:  # ExecutorError is a ValueError
        parser.fail(e)
    except KeyboardInterrupt:
        print(f"interrupted: every finished kernel is stored in {args.out}; the same command "
              "continues", file=sys.stderr)
        return 130
    print_summary(outcome)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
