"""`python -m experiments.confirm RUN_DIR...`: a confirmation timing of every kernel a run selected.

Why (issue 15): best-so-far (and best-of-k) picks the fastest of noisy measurements, so the
speedup it was picked on is biased upwards: the maximum of noisy draws. A report must publish a
measurement that played no part in the selection. So every kernel that is the best-so-far of a
trajectory at some turn (refinement) or the best of a problem's samples (sampling) is timed again,
in a fresh evaluation, and that result is stored beside the run's attempts in
`confirmations.jsonl`; the selection measurement stays in `attempts.sqlite`. The report then uses
the confirmation for the selected kernels' speedups (experiments/metrics.py, `confirmed`).

A kernel's speed is a property of the kernel on this machine: a confirmation is cached per
(problem and its source, size, backend, kernel source, device, timing options) in
`<cache>/confirm/`, so the same kernel selected in several runs of a sweep (the three feedback
modes of a replayed transcript, say) is confirmed once and reported alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.records import Attempt
from feedback.result import EvalResult

CONFIRMATIONS = "confirmations.jsonl"


class Confirmation(BaseModel):
    """The confirmation timing of one selected attempt."""

    model_config = ConfigDict(frozen=True)

    problem_id: str
    index: int = Field(description="Trajectory or sample index of the confirmed attempt.")
    turn: int
    code_hash: str
    result: EvalResult = Field(description="The fresh evaluation's result (timing and speedups).")


def selected(attempts: list[Attempt], mode: str, margin: float) -> list[Attempt]:
    """Every attempt that some figure of the report reads a speedup from: each trajectory's
    best-so-far at every turn (refine), or each problem's best sample (sample)."""
    from agent.records import best_per_turn
    from experiments.metrics import best_of

    groups: dict[tuple[str, int], list[Attempt]] = {}
    for a in sorted(attempts, key=lambda a: (a.candidate.problem_id, a.candidate.index, a.candidate.turn)):
        key = (a.candidate.problem_id, a.candidate.index if mode == "refine" else 0)
        groups.setdefault(key, []).append(a)
    out: dict[tuple[str, int, int], Attempt] = {}
    for group in groups.values():
        picks = [group[i] for i in best_per_turn(group, margin) if i is not None] \
            if mode == "refine" else [b for b in [best_of(group, margin)] if b is not None]
        for a in picks:
            out[(a.candidate.problem_id, a.candidate.index, a.candidate.turn)] = a
    return list(out.values())


def _key(problem, attempt: Attempt, backend: str, options, device: str | None) -> str:
    from feedback import cache

    return cache.digest("confirm", *cache.problem_identity(problem, options.size), backend,
                        attempt.result.code_hash, device, cache.harness_version(),
                        options.model_dump_json(exclude={"cache_dir", "profile"}))


def confirm_run(run_dir: Path, evaluator=None) -> list[Confirmation]:
    """Confirm the selected kernels of one run (cached, see the module docstring); writes and
    returns `confirmations.jsonl`."""
    from experiments.reevaluate import _problems
    from experiments.runs import load_run
    from feedback import cache
    from feedback.environment import known_device
    from feedback.evaluate import LocalEvaluator
    from feedback.options import EvalOptions

    run = load_run(run_dir)
    config = run.config
    backend = config.get("backend") or "cuda"
    options = EvalOptions(**{**(config.get("eval_options") or {}), "size": config.get("size"),
                             "profile": False})
    picks = selected(run.attempts(), run.mode, run.noise_margin)
    problems = _problems(config.get("problems") or "", {a.candidate.problem_id for a in picks}) \
        if picks else {}
    ev = evaluator or LocalEvaluator()
    done = []
    for a in picks:
        problem, prior = problems[a.candidate.problem_id], a.result
        device = known_device(prior.environment)
        path = Path(options.cache_dir) / "confirm" / f"{_key(problem, a, backend, options, device)[:32]}.json"
        result = cache.read_record(path, EvalResult) if device else None
        if result is None:
            fresh = prior.model_copy(update={"runtime": None, "eager": None, "compiled": None,
                                             "speedup_eager": None, "speedup_compile": None,
                                             "noise": None, "profile": None})
            result = ev.perform(problem, a.candidate.code, backend, options, fresh)
            if device and result.status.value == "ok" and result.runtime is not None:
                cache.write_record(path, result)
        c = a.candidate
        done.append(Confirmation(problem_id=c.problem_id, index=c.index, turn=c.turn,
                                 code_hash=prior.code_hash, result=result))
        print(f"confirmed {c.problem_id} #{c.index} turn {c.turn}: {result.status.value} "
              f"speedup {result.speedup_eager} (selected at {prior.speedup_eager})", file=sys.stderr)
    (Path(run_dir) / CONFIRMATIONS).write_text("".join(x.model_dump_json() + "\n" for x in done))
    return done


def load_confirmations(run_dir: Path) -> dict[tuple[str, int, int], EvalResult]:
    """A run's confirmations by (problem, index, turn); empty when it has none."""
    path = Path(run_dir) / CONFIRMATIONS
    if not path.exists():
        return {}
    rows = [Confirmation.model_validate_json(line) for line in path.read_text().splitlines() if line]
    return {(r.problem_id, r.index, r.turn): r.result for r in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.confirm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", metavar="RUN_DIR")
    args = parser.parse_args(argv)
    for run in args.runs:
        confirm_run(run)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
