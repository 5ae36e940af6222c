"""sampling.py's rules on hand-computed numbers, and the pinning of the time job."""

from __future__ import annotations

import math
import os

import pytest

from feedback.options import EvalOptions
from feedback.worker import pinning, sampling


def test_calls_per_sample_fill_the_target_interval_within_the_limits():
    assert sampling.calls_per_interval(0.05, 2.0, 64, 100) == 40
    assert sampling.calls_per_interval(0.01, 2.0, 64, 100) == 64     # max_calls
    assert sampling.calls_per_interval(0.01, 2.0, 64, 10) == 10      # input memory
    assert sampling.calls_per_interval(3.0, 2.0, 64, 100) == 1       # long enough alone
    assert sampling.calls_per_interval(0.05, 0.0, 64, 100) == 1      # switched off


def test_the_sample_length_is_the_options_or_the_devices_default():
    assert sampling.interval_ms(EvalOptions(), "cuda") == sampling.INTERVAL_MS["cuda"] == 30.0
    assert sampling.interval_ms(EvalOptions(), "cpu") == sampling.INTERVAL_MS["cpu"] == 2.0
    assert sampling.interval_ms(EvalOptions(interval_ms=0), "cuda") == 0
    assert sampling.interval_ms(EvalOptions(interval_ms=5), "cpu") == 5
    assert sampling.max_calls(EvalOptions(), "cuda") == 512
    assert sampling.max_calls(EvalOptions(), "cpu") == 64
    assert sampling.max_calls(EvalOptions(max_calls_per_interval=3), "cuda") == 3


def test_standard_error_of_the_median_from_the_iqr():
    times = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    # quartiles (exclusive method) 2.25 and 6.75; median 4.5
    want = 1.2533 * (6.75 - 2.25) / 1.349 / math.sqrt(8) / 4.5
    assert sampling.median_se(times) == pytest.approx(want)
    assert sampling.median_se([1.0, 2.0, 3.0]) is None


def test_sampling_stops_at_the_standard_error_target_or_the_most():
    steady = [1.0] * 10
    assert not sampling.enough(steady[:5], min_n=6, max_n=100, se_target=0.01)
    assert sampling.enough(steady, min_n=6, max_n=100, se_target=0.01)
    noisy = [1.0, 2.0] * 5
    assert not sampling.enough(noisy, min_n=6, max_n=100, se_target=0.01)
    assert sampling.enough(noisy, min_n=6, max_n=10, se_target=0.01)


def test_warm_up_ends_when_two_windows_agree():
    assert not sampling.warmed_up([1.0] * 9, 5)
    assert sampling.warmed_up([1.0] * 10, 5)
    assert not sampling.warmed_up([2.0] * 5 + [1.0] * 5, 5)
    assert sampling.warmed_up([1.005] * 5 + [1.0] * 5, 5)
    assert not sampling.warmed_up([1.0] * 5, 3)
    assert sampling.warmed_up([2.0] * 4 + [1.0] * 6, 3)
    assert not sampling.warmed_up([2.0] * 4 + [1.0] * 6, 5)


def test_noise_is_the_larger_of_the_pass_gap_and_two_standard_errors():
    a, b = [1.0] * 8, [1.1] * 8
    # median of both 1.05; passes differ by 0.1; the IQR of both is 0.1 too
    gap = 0.1 / 1.05
    se = 1.2533 * 0.1 / 1.349 / 4 / 1.05
    assert sampling.noise(a, b) == pytest.approx(max(gap, 2 * se))
    assert sampling.noise([1.0] * 8, [1.0] * 8) == 0.0
    assert sampling.noise([], b) is None
    stats = sampling.summarize(a, b, "host_wall", 3)
    assert stats.n == 16 and stats.calls_per_sample == 3 and stats.pass_medians_ms == [1.0, 1.1]
    assert stats.noise == sampling.noise(a, b)
    assert stats.samples_ms == [1.0, 1.1] * 8  # in the order taken: A, B, A, B, ...
    assert sampling.summarize([1.0, 2.0, 3.0], [4.0, 5.0], "host_wall", 1).samples_ms == [
        1.0, 4.0, 2.0, 5.0, 3.0]  # the run stopped after an A sample
    assert stats.launch_ms is None  # the host clock: no launches apart from the timed window
    assert sampling.summarize(a, b, "cuda_events", 3, [0.02, 0.5, 0.03]).launch_ms == 0.03
    assert stats.tail_ms is None
    assert sampling.summarize(a, b, "cuda_events", 3, (), [0.01, 0.2, 0.015]).tail_ms == 0.015
    assert stats.wake_ms is None
    assert sampling.summarize(a, b, "cuda_events", 3, (), (), [0.04, 0.1, 0.05]).wake_ms == 0.05


def test_a_window_loses_the_hosts_wake_up_and_never_more_than_its_tail():
    # 10 ms from start to end; the calls' stream was done 0.11 ms before the end event; the
    # host's wake-up on trusted work just before took 0.04 ms: only that is taken out
    assert sampling.window_ms(10.0, 0.11, 0.04) == pytest.approx(9.96)
    # a wake-up longer than the tail: the window still ends no earlier than the calls' stream
    assert sampling.window_ms(10.0, 0.03, 0.2) == pytest.approx(9.97)
    # work left on other streams (a 2 ms tail) counts, less at most SIDE_TAIL_MS of allowance
    assert sampling.window_ms(10.0, 2.0, 5.0) == pytest.approx(10.0 - sampling.SIDE_TAIL_MS)
    assert sampling.window_ms(10.0, 0.1, -0.001) == 10.0  # clock jitter never adds time


def test_noise_is_at_least_the_windows_host_share():
    a, b = [1.0] * 8, [1.0] * 8  # the passes agree exactly, the standard error is 0
    assert sampling.summarize(a, b, "cuda_events", 4).noise == 0.0
    # a median tail of 0.1 ms per window of 4 calls of 1 ms: 2 x 0.1 / 4 / 1.0
    assert sampling.summarize(a, b, "cuda_events", 4, (), [0.1, 0.1, 0.3]).noise == pytest.approx(0.05)
    ragged = [1.0, 1.2, 1.0, 1.2, 1.0, 1.2, 1.0, 1.2]
    inside = sampling.noise(ragged, [1.0] * 8)
    assert sampling.summarize(ragged, [1.0] * 8, "cuda_events", 4, (), [0.0]).noise == inside > 0


def test_work_left_on_other_streams_is_told_by_the_single_calls_tails():
    assert not sampling.outlives_stream([])  # the cpp clock: no tails
    assert not sampling.outlives_stream([0.05, 0.14, 0.03, 2.0])  # host wake-ups, one outlier
    assert sampling.outlives_stream([2.06, 2.1, 0.05])  # a side stream's ~2 ms after each call
    assert sampling.outlives_stream([sampling.SIDE_TAIL_MS * 1.01] * 3)


def test_max_trials_defaults_to_four_times_the_least_asked_for_or_the_devices_most():
    assert sampling.max_trials(EvalOptions(timing_trials=25), "cuda") == 100
    assert sampling.max_trials(EvalOptions(timing_trials=25, timing_max_trials=30), "cpu") == 30
    assert sampling.max_trials(EvalOptions(timing_trials=25, timing_max_trials=5), "cuda") == 25


def test_the_least_samples_are_the_options_or_the_devices_default():
    assert sampling.min_trials(EvalOptions(), "cuda") == sampling.MIN_TRIALS["cuda"] == 10
    assert sampling.min_trials(EvalOptions(), "cpu") == sampling.MIN_TRIALS["cpu"] == 100
    assert sampling.max_trials(EvalOptions(), "cuda") == sampling.MAX_TRIALS["cuda"] == 120
    assert sampling.max_trials(EvalOptions(), "cpu") == sampling.MAX_TRIALS["cpu"] == 400
    assert sampling.min_trials(EvalOptions(timing_trials=7), "cuda") == 7


def test_pin_moves_every_thread_and_leaves_none_behind():
    before = os.sched_getaffinity(0)
    one = min(before)
    try:
        assert pinning.pin([one]) == [one]
        for tid in os.listdir("/proc/self/task"):
            assert os.sched_getaffinity(int(tid)) == {one}
        assert pinning.pin(None) is None and pinning.pin([]) is None
    finally:
        for tid in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(tid), before)


def test_no_more_calls_than_the_host_can_draw_inputs_for_in_one_window():
    # 0.01 ms calls would want 3000 in 30 ms; at 0.5 ms of host time to draw each call's inputs,
    # 60 of them take the whole window
    assert sampling.calls_per_interval(0.01, 30.0, 512, 10_000, refill_ms=0.5) == 60
    assert sampling.calls_per_interval(0.1, 30.0, 512, 10_000, refill_ms=0.05) == 300  # not bound
    assert sampling.calls_per_interval(0.01, 30.0, 512, 10_000, refill_ms=100.0) == 1


def test_host_bound_is_a_launch_time_near_the_call_time():
    assert sampling.host_bound(0.009, 0.01)          # launching takes 90% of the call
    assert not sampling.host_bound(0.02, 0.1)        # a 0.1 ms kernel launched in 0.02 ms
    assert not sampling.host_bound(None, 0.01)       # a host clock (cpp)


def test_sizing_takes_the_least_of_the_trials_so_a_first_use_alone_makes_nothing_host_bound():
    # H200 runs 36-37: the first trial of a 0.05 ms relu carried its outputs' first allocations
    first, second = (0.120, 0.100), (0.054, 0.020)
    per_call, launch = sampling.sizing([first, second])
    assert (per_call, launch) == (0.054, 0.020) and not sampling.host_bound(launch, per_call)
    assert sampling.host_bound(*first)  # the first trial alone would have capped its calls
    bound = sampling.sizing([(0.011, 0.0105), (0.010, 0.0095)])  # host-bound in every trial
    assert bound == (0.010, 0.0095) and sampling.host_bound(*bound)
    assert sampling.sizing([(0.5, None), (0.4, None)]) == (0.4, None)  # a host clock (cpp)
