"""What a person sees: a live progress display while a run works, and the table at its end.

The live display is transient and goes to stderr; the table is computed from the run store (the
data), so it is the same whether the run went straight through or was resumed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from typing_extensions import Self

from agent.records import Attempt, Trajectory

THRESHOLDS = (0.0, 1.0, 2.0)
"""fast_p thresholds shown: fast_0 (correct), fast_1 (faster than eager), fast_2."""


class RunProgress:
    """Rich progress bars: one for the run, one per trajectory in flight."""

    def __init__(self, total: int, *, enabled: bool = True, done: int = 0,
                 label: str = "attempts"):
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=Console(stderr=True), transient=True, disable=not enabled)
        self._overall = self._progress.add_task(label, total=total, completed=done)

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def start(self, label: str, turns: int, done: int = 0) -> TaskID:
        return self._progress.add_task(label, total=turns, completed=done)

    def attempt(self, task: TaskID, label: str, attempt: Attempt, best: Attempt | None) -> None:
        """One attempt finished: advance both bars and show its outcome and the best so far."""
        status = attempt.result.status.value if attempt.result else "no_code"
        speedup = best.result.speedup_eager if best and best.result else None
        shown = (f"best {speedup:.2f}x" if speedup is not None
                 else "best ok" if best else "no best")
        self._progress.update(task, advance=1, description=f"{label}  {status}  {shown}")
        self._progress.advance(self._overall)

    def finish(self, task: TaskID) -> None:
        self._progress.remove_task(task)

    def step(self, description: str) -> None:
        """One item of a batch without trajectories finished: advance the run's bar only."""
        self._progress.update(self._overall, advance=1, description=description)


def _fast(attempt: Attempt | None, p: float) -> bool:
    """Correct, and (for p > 0) measured faster than eager by more than p."""
    if attempt is None or attempt.result is None or not attempt.result.correct:
        return False
    if p == 0.0:
        return True
    speedup = attempt.result.speedup_eager
    return speedup is not None and speedup > p


def _geomean(attempts: Iterable[Attempt | None]) -> float | None:
    speedups = [a.result.speedup_eager for a in attempts if _fast(a, 0.0)
                and a.result.speedup_eager is not None]
    return math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None


def _usage(attempts: list[Attempt]) -> tuple[int, float | None]:
    """Total tokens, and total dollars (None when any call's cost is unknown)."""
    tokens = sum(a.candidate.usage.prompt_tokens + a.candidate.usage.completion_tokens
                 for a in attempts)
    costs = [a.candidate.usage.cost_usd for a in attempts]
    return tokens, (None if any(c is None for c in costs) else sum(costs))


def _row(label: str, best: list[Attempt | None], n: int, used: list[Attempt]) -> list[str]:
    geo = _geomean(best)
    tokens, dollars = _usage(used)
    fast = [f"{sum(_fast(a, p) for a in best) / n:.0%}" if n else "-" for p in THRESHOLDS]
    return [label, *fast, f"{geo:.2f}x" if geo is not None else "-", f"{tokens:,}",
            f"${dollars:.4f}" if dollars is not None else "unknown"]


def _table(title: str, first: str) -> Table:
    table = Table(title=title)
    for column in (first, "fast_0", "fast_1", "fast_2", "geomean speedup", "tokens", "cost"):
        table.add_column(column, justify="left" if column == first else "right")
    return table


def refine_table(trajectories: list[Trajectory], expected: int, turns: int) -> Table:
    """fast_p of the best-so-far after each turn, over `expected` trajectories.

    A trajectory that stored no attempt counts as a failure; one that stopped early (target
    speedup, or an error) keeps its last best. Tokens and dollars are cumulative.
    """
    table = _table(f"best-so-far over {expected} trajectories (speedup vs eager)", "turn")
    for turn in range(1, turns + 1):
        best = [t.best_at(turn) for t in trajectories]
        used = [a for t in trajectories for a in t.attempts if a.candidate.turn < turn]
        table.add_row(*_row(str(turn), best, expected, used))
    return table


def sample_table(trajectories: list[Trajectory], problems: int, k: int) -> Table:
    """Per-sample rates, and best-of-k per problem (fast_p@k with all k samples)."""
    samples = [a for t in trajectories for a in t.attempts]
    table = _table(f"{k} samples for each of {problems} problems (speedup vs eager)", "")
    table.add_row(*_row("one sample", samples, problems * k, samples))
    by_problem: dict[str, list[Attempt]] = {}
    for a in samples:
        by_problem.setdefault(a.candidate.problem_id, []).append(a)
    best = [max(group, key=lambda a: (_fast(a, 0.0), a.result.speedup_eager or 0.0
                                      if a.result else 0.0)) for group in by_problem.values()]
    table.add_row(*_row(f"best of {k}", best, problems, samples))
    return table
