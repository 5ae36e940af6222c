"""The published numbers: fast_p, fast_p@N, fast_p@k, geometric-mean speedup, rates, with CIs.

Pure functions over stored `Attempt`s. Every headline figure is a mean over problems of a
per-problem score (0/1 for fast_p, a share of trajectories for fast_p@N, the unbiased estimate for
fast_p@k), so one bootstrap over problems gives every figure its confidence interval.

A `Layout` says which attempts a run *should* have; an attempt absent from the grid counts as a
failure, never as a smaller denominator, and every `Score` carries its denominator.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from agent.records import Attempt, improves
from feedback.result import Status

Baseline = Literal["eager", "compile"]
Grid = Mapping[tuple[str, int, int], Attempt]
"""Attempts of one run keyed like the store: (problem id, trajectory or sample index, turn)."""

NOT_COMPILED = {Status.static_reject, Status.compile_error}
TIMING_FIELDS = ("runtime", "eager", "compiled", "speedup_eager", "speedup_compile", "noise")
"""The fields of a result a confirmation timing replaces (experiments/confirm.py)."""


class ConfirmedGrid(dict):
    """A grid whose selected kernels may have confirmation timings, keyed like the grid: the
    selection reads the stored measurements, the published speedups read the confirmations."""

    def __init__(self, attempts: Mapping, confirmations: Mapping | None = None) -> None:
        super().__init__(attempts)
        self.confirmations = dict(confirmations or {})


def confirmed(attempt: Attempt | None, grid: Grid) -> Attempt | None:
    """`attempt` with its timing taken from its confirmation in `grid`, when there is one."""
    confirmations = getattr(grid, "confirmations", None)
    if attempt is None or attempt.result is None or not confirmations:
        return attempt
    c = attempt.candidate
    again = confirmations.get((c.problem_id, c.index, c.turn))
    if again is None:
        return attempt
    timing = {f: getattr(again, f) for f in TIMING_FIELDS}
    if again.status != Status.ok:  # the fresh evaluation failed: no speedup is published
        timing = {f: None for f in TIMING_FIELDS}
    return attempt.model_copy(update={"result": attempt.result.model_copy(update=timing)})
MISSING = "missing"
NO_CODE = "no_code"


@dataclass(frozen=True)
class Layout:
    """The attempts a run was asked for: problems x indices x turns (sampling: turns = 1)."""

    mode: Literal["refine", "sample"]
    problems: tuple[str, ...]
    indices: int
    turns: int

    def asked(self) -> list[tuple[str, int, int]]:
        return [(p, i, t) for p in self.problems for i in range(self.indices)
                for t in range(self.turns)]


@dataclass(frozen=True)
class Score:
    """A headline figure with its denominator and a percentile-bootstrap interval over problems."""

    value: float
    numerator: float = 0.0
    denominator: int = 0
    low: float = math.nan
    high: float = math.nan

    def __str__(self) -> str:
        num = f"{self.numerator:g}"
        return f"{self.value:.3f} ({num}/{self.denominator}) [{self.low:.3f}, {self.high:.3f}]"


# ----------------------------------------------------------------------------- one attempt

def speedup(attempt: Attempt | None, baseline: Baseline = "eager") -> float | None:
    """The measured speedup of a correct attempt against a baseline; None when not measured."""
    if not is_correct(attempt):
        return None
    r = attempt.result
    return r.speedup_eager if baseline == "eager" else r.speedup_compile


def is_correct(attempt: Attempt | None) -> bool:
    return attempt is not None and attempt.result is not None and attempt.result.correct


def compiled(attempt: Attempt | None) -> bool:
    """Got past the static screen and the build (a missing or code-less attempt did not)."""
    return attempt is not None and attempt.result is not None and \
        attempt.result.status not in NOT_COMPILED


def speedup_interval(attempt: Attempt | None, baseline: Baseline = "eager"
                     ) -> tuple[float, float] | None:
    """The speedup's interval from the measured noise: s / (1 + e) to s * (1 + e), where e
    combines the candidate's and the baseline's noise (each its between-evaluation variation
    estimated inside the evaluation: feedback/worker/sampling.py) as sqrt(e_new^2 + e_base^2).
    None when the speedup was not measured; a noise that was not measured counts as 0."""
    s = speedup(attempt, baseline)
    if s is None:
        return None
    r = attempt.result
    base = r.eager if baseline == "eager" else r.compiled
    e = math.hypot(r.noise or 0.0, (base.noise if base is not None else None) or 0.0)
    return s / (1 + e), s * (1 + e)


def is_fast(attempt: Attempt | None, p: float, baseline: Baseline = "eager",
            lower: bool = False) -> bool:
    """fast_p for one kernel: correct, and for p > 0 a *measured* speedup strictly above p;
    with `lower`, the low end of its noise interval (`speedup_interval`) above p, so a decision
    that lies within the noise does not count."""
    if p < 0:
        raise ValueError(f"p must be >= 0, got {p}")
    if not is_correct(attempt):
        return False
    if p == 0:
        return True
    if lower:
        bounds = speedup_interval(attempt, baseline)
        return bounds is not None and bounds[0] > p
    s = speedup(attempt, baseline)
    return s is not None and s > p


def status_of(attempt: Attempt | None) -> str:
    """Status name for failure breakdowns: `missing` and `no_code` besides the evaluator's."""
    if attempt is None:
        return MISSING
    return attempt.result.status.value if attempt.result is not None else NO_CODE


# ----------------------------------------------------------------------------- best-so-far

def best_of(attempts: Iterable[Attempt], noise_margin: float = 0.0) -> Attempt | None:
    """The best of attempts taken in the given order (each must beat the best before it).

    Uses the agent's own rule (`agent.records.improves`: correct, and faster by more than the
    larger of `noise_margin` and the measured noise), recomputed here from the stored attempts.
    """
    best = None
    for a in attempts:
        if improves(a, best, noise_margin):
            best = a
    return best


def best_so_far(attempts: Iterable[Attempt], upto_turn: int,
                noise_margin: float = 0.0) -> Attempt | None:
    """The best kernel of one trajectory after turn `upto_turn` (0-based), None if none correct."""
    done = sorted((a for a in attempts if a.candidate.turn <= upto_turn),
                  key=lambda a: a.candidate.turn)
    return best_of(done, noise_margin)


def trajectory(grid: Grid, layout: Layout, problem: str, index: int) -> list[Attempt]:
    """The stored attempts of one trajectory, in turn order."""
    return [grid[(problem, index, t)] for t in range(layout.turns) if (problem, index, t) in grid]


def final_kernels(grid: Grid, layout: Layout, noise_margin: float = 0.0,
                  upto: int | None = None) -> dict[tuple[str, int], Attempt | None]:
    """The kernel each trajectory (refine) or problem (sample, index 0) ends with.

    Refinement: best-so-far of each trajectory after `upto` turns (default all). Sampling: the
    fastest correct of the first `upto` samples, as a user keeping the best of k would. Selected
    on the stored measurements; returned with their confirmation timings where the grid has them
    (`ConfirmedGrid`), so a published speedup is never the maximum of the draws it was picked on.
    """
    out: dict[tuple[str, int], Attempt | None] = {}
    for p in layout.problems:
        if layout.mode == "refine":
            for i in range(layout.indices):
                n = layout.turns if upto is None else upto
                out[(p, i)] = best_so_far(trajectory(grid, layout, p, i), n - 1, noise_margin)
        else:
            k = layout.indices if upto is None else upto
            out[(p, 0)] = best_of([grid[(p, i, 0)] for i in range(k) if (p, i, 0) in grid],
                                  noise_margin)
    return {key: confirmed(a, grid) for key, a in out.items()}


# ----------------------------------------------------------------------------- estimators

def unbiased_at_k(n: int, c: int, k: int) -> float:
    """P(at least one of k draws without replacement from n is good), c good: 1 - C(n-c,k)/C(n,k).

    Product form (no huge binomials); NaN when n < k, since k samples were never drawn.
    """
    if k < 1 or c < 0 or c > n:
        raise ValueError(f"need k >= 1 and 0 <= c <= n, got n={n} c={c} k={k}")
    if n < k:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


# ----------------------------------------------------------------------------- aggregation

def _interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    if np.all(np.isnan(stats)):
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2 * 100
    lo, hi = np.nanpercentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)


def bootstrap_ci(groups: Sequence[Sequence[float]], statistic: Callable[[np.ndarray], float],
                 resamples: int = 1000, seed: int = 0, confidence: float = 0.95,
                 ) -> tuple[float, float]:
    """Percentile interval of `statistic` over problems resampled with replacement.

    `groups` holds each problem's values (one score, or several kernels' log speedups); a
    resample draws problems, concatenates their values and applies `statistic`.
    """
    if not groups or resamples <= 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    arrays = [np.asarray(g, dtype=float) for g in groups]
    stats = np.empty(resamples)
    for b, picks in enumerate(rng.integers(0, len(arrays), size=(resamples, len(arrays)))):
        stats[b] = statistic(np.concatenate([arrays[j] for j in picks]))
    return _interval(stats, confidence)


def summarize(per_problem: Mapping[str, float], resamples: int = 1000, seed: int = 0,
              confidence: float = 0.95) -> Score:
    """Mean over problems of per-problem scores, with denominator and bootstrap CI.

    The same resampling as `bootstrap_ci` with one value per problem, done in one numpy step.
    """
    values = np.asarray(list(per_problem.values()), dtype=float)
    if not len(values):
        return Score(math.nan, 0.0, 0)
    lo = hi = math.nan
    if resamples > 0:
        picks = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
        lo, hi = _interval(values[picks].mean(axis=1), confidence)
    return Score(float(values.mean()), float(values.sum()), len(values), lo, hi)


def fast_p(best: Mapping[str, Attempt | None], p: float, baseline: Baseline = "eager",
           problems: Sequence[str] | None = None, resamples: int = 1000, seed: int = 0) -> Score:
    """Share of problems whose kernel is correct and (p > 0) measured faster than p x baseline.

    `best` maps a problem to the kernel submitted for it; problems in `problems` absent from
    `best` count as failures.
    """
    problems = list(best) if problems is None else list(problems)
    return summarize({q: float(is_fast(best.get(q), p, baseline)) for q in problems},
                     resamples, seed)


def fast_p_at_n(grid: Grid, layout: Layout, n: int, p: float, baseline: Baseline = "eager",
                noise_margin: float = 0.0, resamples: int = 1000, seed: int = 0,
                lower: bool = False) -> Score:
    """Refinement: per trajectory, is the best-so-far after N turns fast_p (`lower`: on its
    interval's low end); mean over trajectories per problem, then over problems."""
    finals = final_kernels(grid, layout, noise_margin, upto=n)
    per = {q: float(np.mean([is_fast(finals[(q, i)], p, baseline, lower)
                             for i in range(layout.indices)])) for q in layout.problems}
    return summarize(per, resamples, seed)


def fast_p_at_k(grid: Grid, layout: Layout, k: int, p: float, baseline: Baseline = "eager",
                resamples: int = 1000, seed: int = 0, lower: bool = False) -> Score:
    """Sampling: unbiased chance that one of k samples is fast_p (`lower`: on the interval's low
    end); n = samples asked for (the missing ones are failures), NaN for every problem when n < k."""
    per = {}
    for q in layout.problems:
        c = sum(is_fast(grid.get((q, i, 0)), p, baseline, lower) for i in range(layout.indices))
        per[q] = unbiased_at_k(layout.indices, c, k)
    return summarize(per, resamples, seed)


def fast_p_final(grid: Grid, layout: Layout, p: float, baseline: Baseline = "eager",
                 noise_margin: float = 0.0, resamples: int = 1000, seed: int = 0,
                 lower: bool = False) -> Score:
    """fast_p at a run's whole budget: fast_p@N at N = turns, or fast_p@k at k = samples."""
    if layout.mode == "refine":
        return fast_p_at_n(grid, layout, layout.turns, p, baseline, noise_margin, resamples, seed,
                           lower)
    return fast_p_at_k(grid, layout, layout.indices, p, baseline, resamples, seed, lower)


def geomean_speedup(kernels: Mapping[tuple[str, int], Attempt | None],
                    baseline: Baseline = "eager", resamples: int = 1000, seed: int = 0) -> Score:
    """Geometric mean of measured speedups over the correct kernels (denominator: those kernels).

    Keys are (problem, index) as from `final_kernels`; the bootstrap resamples problems.
    """
    logs: dict[str, list[float]] = {}
    for (q, _), a in kernels.items():
        s = speedup(a, baseline)
        logs.setdefault(q, [])
        if s is not None and s > 0:
            logs[q].append(math.log(s))
    flat = np.asarray([v for vs in logs.values() for v in vs], dtype=float)

    def geo(values: np.ndarray) -> float:
        return float(np.exp(np.mean(values))) if len(values) else math.nan

    lo, hi = bootstrap_ci(list(logs.values()), geo, resamples, seed)
    return Score(geo(flat), float(len(flat)), len(flat), lo, hi)


def _attempt_rate(grid: Grid, layout: Layout, ok: Callable[[Attempt | None], bool],
                  resamples: int, seed: int) -> Score:
    per = {q: float(np.mean([ok(grid.get((q, i, t))) for i in range(layout.indices)
                             for t in range(layout.turns)])) for q in layout.problems}
    score = summarize(per, resamples, seed)
    hits = sum(ok(grid.get(key)) for key in layout.asked())
    return Score(score.value, float(hits), len(layout.asked()), score.low, score.high)


def compile_rate(grid: Grid, layout: Layout, resamples: int = 1000, seed: int = 0) -> Score:
    """Share of all asked-for attempts that compiled (denominator: attempts, not problems)."""
    return _attempt_rate(grid, layout, compiled, resamples, seed)


def correct_rate(grid: Grid, layout: Layout, resamples: int = 1000, seed: int = 0) -> Score:
    """Share of all asked-for attempts that were correct (denominator: attempts)."""
    return _attempt_rate(grid, layout, is_correct, resamples, seed)


def status_counts(grid: Grid, layout: Layout, turn: int | None = None) -> Counter[str]:
    """Outcome of every asked-for attempt (optionally one turn only), `missing` included."""
    return Counter(status_of(grid.get(key)) for key in layout.asked()
                   if turn is None or key[2] == turn)
