"""Metrics against numbers worked out by hand (comments show the arithmetic)."""

from __future__ import annotations

import math

import pytest

from experiments import metrics as m


def test_unbiased_at_k_hand_values():
    assert m.unbiased_at_k(5, 2, 2) == pytest.approx(0.7)   # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert m.unbiased_at_k(10, 3, 1) == pytest.approx(0.3)  # c/n at k = 1
    assert m.unbiased_at_k(4, 1, 2) == pytest.approx(0.5)   # 1 - C(3,2)/C(4,2) = 1 - 3/6


def test_unbiased_at_k_edges():
    assert m.unbiased_at_k(3, 0, 3) == 0.0     # n = k, c = 0
    assert m.unbiased_at_k(3, 1, 3) == 1.0     # n = k, c > 0
    assert m.unbiased_at_k(5, 5, 2) == 1.0     # c = n
    assert m.unbiased_at_k(5, 0, 2) == 0.0     # c = 0
    assert math.isnan(m.unbiased_at_k(2, 1, 3))  # n < k: never drawn, NaN not 0
    with pytest.raises(ValueError):
        m.unbiased_at_k(3, 4, 1)


def test_unbiased_at_k_is_stable_for_large_n():
    # C(1000, 500) overflows floats; the product form does not. 1 - (990/1000 ... ) checked loosely.
    value = m.unbiased_at_k(1000, 10, 500)
    assert 0.99 < value <= 1.0


def test_is_fast_strict_and_unmeasured(attempt):
    a = attempt(eager=1.0, compile=2.0)
    assert m.is_fast(a, 0) and not m.is_fast(a, 1.0)          # speedup 1.0 is not > 1
    assert m.is_fast(a, 1.5, "compile") and not m.is_fast(a, 2.0, "compile")
    unmeasured = attempt(eager=None)
    assert m.is_fast(unmeasured, 0) and not m.is_fast(unmeasured, 0.5)
    assert not m.is_fast(attempt(status="mismatch"), 0)
    assert not m.is_fast(attempt(status="no_code"), 0)
    assert not m.is_fast(None, 0)


def test_fast_p_counts_missing_problems_as_failures(attempt):
    best = {"a": attempt("a", eager=2.0), "b": attempt("b", eager=0.5)}
    score = m.fast_p(best, 1.0, problems=["a", "b", "c", "d"])
    assert (score.value, score.numerator, score.denominator) == (0.25, 1.0, 4)
    assert m.fast_p(best, 0, problems=["a", "b", "c", "d"]).value == 0.5


def test_best_so_far_respects_noise(attempt):
    traj = [attempt(turn=0, status="compile_error"),
            attempt(turn=1, runtime_ms=10.0, eager=1.0),
            attempt(turn=2, runtime_ms=9.7, eager=1.03, noise=0.05),  # 3% faster, 5% noise
            attempt(turn=3, runtime_ms=5.0, eager=2.0, noise=0.05)]
    assert m.best_so_far(traj, 0) is None
    assert m.best_so_far(traj, 2).candidate.turn == 1
    assert m.best_so_far(traj, 3).candidate.turn == 3
    # Without measured noise a 3% gain is progress, unless the margin says otherwise.
    quiet = [a.model_copy(update={"result": a.result.model_copy(update={"noise": None})})
             if a.result else a for a in traj]
    assert m.best_so_far(quiet, 2).candidate.turn == 2
    assert m.best_so_far(quiet, 2, noise_margin=0.05).candidate.turn == 1


def test_best_so_far_untimed_then_timed(attempt):
    traj = [attempt(turn=0, runtime_ms=None), attempt(turn=1, runtime_ms=3.0, eager=1.0),
            attempt(turn=2, runtime_ms=None)]
    assert m.best_so_far(traj, 0).candidate.turn == 0
    assert m.best_so_far(traj, 2).candidate.turn == 1


def _refine_grid(attempt):
    # Problem a: trajectory 0 fast (2x) at turn 1; trajectory 1 correct-but-slow at turn 0.
    # Problem b: trajectory 0 only a mismatch at turn 0, turn 1 missing; trajectory 1 missing.
    rows = [attempt("a", 0, 0, status="compile_error"), attempt("a", 0, 1, eager=2.0),
            attempt("a", 1, 0, eager=0.8), attempt("a", 1, 1, status="mismatch"),
            attempt("b", 0, 0, status="mismatch")]
    grid = {(a.candidate.problem_id, a.candidate.index, a.candidate.turn): a for a in rows}
    return grid, m.Layout("refine", ("a", "b"), indices=2, turns=2)


def test_fast_p_at_n_hand_values(attempt):
    grid, layout = _refine_grid(attempt)
    # N=1: a -> [fail, correct] = 0.5 correct, [0, 0] fast; b -> 0.
    assert m.fast_p_at_n(grid, layout, 1, 0).value == pytest.approx(0.25)
    assert m.fast_p_at_n(grid, layout, 1, 1.0).value == 0.0
    # N=2: a -> both correct (1.0), one fast (0.5); b -> 0.
    assert m.fast_p_at_n(grid, layout, 2, 0).value == pytest.approx(0.5)
    score = m.fast_p_at_n(grid, layout, 2, 1.0)
    assert (score.value, score.numerator, score.denominator) == (0.25, 0.5, 2)


def test_rates_and_status_counts_include_missing(attempt):
    grid, layout = _refine_grid(attempt)
    # 8 asked for; compiled: a00? no, a01 yes, a10 yes, a11 yes (mismatch compiled), b00 yes.
    c = m.compile_rate(grid, layout)
    assert (c.numerator, c.denominator, c.value) == (4.0, 8, 0.5)
    r = m.correct_rate(grid, layout)
    assert (r.numerator, r.denominator, r.value) == (2.0, 8, 0.25)
    assert m.status_counts(grid, layout) == {"missing": 3, "mismatch": 2, "ok": 2,
                                             "compile_error": 1}
    assert m.status_counts(grid, layout, turn=0)["missing"] == 1


def test_fast_p_at_k_hand_values(attempt):
    # a: 3 samples asked, 2 fast_1 -> @1 = 2/3, @2 = 1; b: 1 of 3 stored (slow) -> @1 = 0.
    rows = [attempt("a", 0, eager=1.5), attempt("a", 1, eager=3.0),
            attempt("a", 2, status="runtime_error"), attempt("b", 1, eager=0.9)]
    grid = {(a.candidate.problem_id, a.candidate.index, 0): a for a in rows}
    layout = m.Layout("sample", ("a", "b"), indices=3, turns=1)
    assert m.fast_p_at_k(grid, layout, 1, 1.0).value == pytest.approx((2 / 3 + 0) / 2)
    assert m.fast_p_at_k(grid, layout, 2, 1.0).value == pytest.approx(0.5)
    assert m.fast_p_at_k(grid, layout, 1, 0).value == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert math.isnan(m.fast_p_at_k(grid, layout, 4, 1.0).value)
    finals = m.final_kernels(grid, layout)
    assert m.speedup(finals[("a", 0)]) == 3.0   # the fastest correct sample


def test_geomean_speedup(attempt):
    kernels = {("a", 0): attempt("a", eager=2.0, runtime_ms=1.0),
               ("b", 0): attempt("b", eager=8.0, runtime_ms=1.0),
               ("c", 0): attempt("c", status="mismatch"), ("d", 0): None}
    score = m.geomean_speedup(kernels)
    assert score.value == pytest.approx(4.0)    # sqrt(2 * 8)
    assert score.denominator == 2
    assert math.isnan(m.geomean_speedup({("c", 0): None}).value)


def test_bootstrap_is_seeded_and_brackets_the_mean():
    per = {str(i): float(i % 3 == 0) for i in range(30)}   # mean 10/30
    s1, s2 = m.summarize(per, resamples=500, seed=3), m.summarize(per, resamples=500, seed=3)
    assert (s1.low, s1.high) == (s2.low, s2.high)
    assert s1.value == pytest.approx(1 / 3)
    assert s1.low < s1.value < s1.high
    constant = m.summarize({"a": 1.0, "b": 1.0})
    assert (constant.low, constant.high) == (1.0, 1.0)


def test_speedup_interval_and_fast_p_beyond_noise(attempt):
    a = attempt(eager=1.05, noise=0.1)  # the baseline's noise unmeasured: counts as 0
    low, high = m.speedup_interval(a)
    assert low == pytest.approx(1.05 / 1.1) and high == pytest.approx(1.05 * 1.1)
    assert m.is_fast(a, 1.0) and not m.is_fast(a, 1.0, lower=True)  # within the noise
    sure = attempt(eager=1.5, noise=0.1)
    assert m.is_fast(sure, 1.0, lower=True)
    assert m.speedup_interval(attempt(status="mismatch")) is None


def test_published_speedups_of_selected_kernels_come_from_their_confirmation(attempt):
    from experiments.metrics import ConfirmedGrid

    picked = attempt("level1/1_a", 0, 0, eager=1.2)  # selected on a lucky 1.2x
    layout = m.Layout("refine", ("level1/1_a",), 1, 1)
    plain = {("level1/1_a", 0, 0): picked}
    again = attempt("level1/1_a", 0, 0, eager=0.9).result  # the separate confirmation timing
    grid = ConfirmedGrid(plain, {("level1/1_a", 0, 0): again})
    assert m.fast_p_at_n(plain, layout, 1, 1.0, resamples=0).value == 1.0
    assert m.fast_p_at_n(grid, layout, 1, 1.0, resamples=0).value == 0.0
    final = m.final_kernels(grid, layout)[("level1/1_a", 0)]
    assert m.speedup(final) == 0.9 and grid[("level1/1_a", 0, 0)].result.speedup_eager == 1.2
    failed = ConfirmedGrid(plain, {("level1/1_a", 0, 0): attempt(status="timeout").result})
    assert m.speedup(m.final_kernels(failed, layout)[("level1/1_a", 0)]) is None
