"""How many calls per timed sample, how many samples, when warm-up is over, and the noise.

Pure functions over per-call times (ms), so the rules are tested by hand-computed numbers.

- Calls per sample: a program shorter than the target interval runs `ceil(target / t)` calls back
  to back in one timed window (at most `max_calls`, and no more than the input memory allows), so
  the fixed cost of a window (the first launch's host time, the device-wide synchronize before the
  end event) is spread over them. Every call needs inputs of fresh content, drawn by the problem's
  own `get_inputs()` outside the window. A host-bound program (`host_bound`: launching a call
  takes about as long as the call) gets no more calls than the host can draw inputs for in one
  target interval (`refill_ms` per call): its window is the host's launches whatever their
  number, so more calls would only multiply the drawing (H200, a small relu at 512 calls a
  sample: 10.5 s of a 17 s time job). A device-bound one is not bound so: capped that way, a
  0.1 ms relu with 128 MB inputs got 35-56 calls instead of 136 under load, and its medians
  spread 2.0% over three evaluations (H200 run 24). Host-boundness is judged on untimed trial
  samples of the calls (`sizing`), never on the first use of their buffers alone.
- Samples: at least `min_n`; more until the relative standard error of the median is at most the
  target, or `max_n`, or the time budget (timing.py).
- Warm-up: untimed samples until the median of the last `window` (`EvalOptions.warmup_window`) is
  within `STABLE` of the median of the `window` before (clocks ramped, caches and allocator
  settled).
- Noise (`EvalResult.noise`): the between-evaluation variation estimated inside one evaluation.
  Samples alternate between two passes, A and B, each with input buffers of its own (allocated
  apart, so where memory landed differs between them as it does between processes); noise is the
  largest of |median A - median B| / median, twice the standard error of the median, and (GPU)
  the window's host share: `HOST_ENDS` x the median tail per window / calls per sample / median.
  Both passes share the host's load, so neither of the first two sees host time inside the
  window, which moves with that load between evaluations; the tail measures one end of it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from feedback.result import TimingStats

INTERVAL_MS = {"cuda": 30.0, "cpu": 2.0}
"""The default target length of one timed sample (`EvalOptions.interval_ms` None), per device.
On the H200 with 8 builds running, each GPU window carried 0.05-0.19 ms of host time (the first
launch after the start event, the wake-up from the device-wide synchronize before the end
event) that varied by up to ~0.05 ms between evaluations: 3-17% of a 1-ms window, about 1% of a
10-ms one (docs/benchmarks.md, P3). 30 ms against 10 ms, same run (H200 run 20): spreads over
three evaluations 0.34% against 1.46% (a 0.1 ms relu), 0.06% against 0.74% (a 0.4 ms softmax)."""
MAX_CALLS = {"cuda": 512, "cpu": 64}
"""The default most calls in one sample (`EvalOptions.max_calls_per_interval` None), per device:
on a GPU enough to fill 30 ms with calls of 0.06 ms; a shorter program's calls are bound by the
host's launch and refill time anyway, which more calls per sample would only multiply."""
MIN_TRIALS = {"cuda": 10, "cpu": 100}
"""The default least number of timed samples (`EvalOptions.timing_trials` None), per device. A
GPU sample is a 30 ms window of up to 512 calls, each on fresh inputs; more samples are taken
while the median's standard error is above `timing_se` (at 10 samples: while the samples' IQR is
above 0.68% of their median). The device holds each timed program alone for its samples, so they
bound how many candidates an hour one GPU evaluates: 30 samples were 0.92 s of a cold candidate's
2.6 s alone and 1.92 s of its problem's two baselines' 3.0 s (H100, run 63). 10 against 30 on the
H100 (run 67, docs/benchmarks.md P3): every spread over evaluations within 1.5%, worst 0.82%
against 0.76%; the short ReLUs' 0.2-0.3% became 0.55-0.61%."""
MAX_TRIALS = {"cuda": 120, "cpu": 400}
"""The default most timed samples (`EvalOptions.timing_max_trials` None, and `timing_trials`
None), per device; `timing_budget_s` bounds them as well."""
SIDE_TAIL_MS = 0.25
"""A program whose single-call windows end, in the median, more than this after its calls' own
stream was done leaves work running on other streams after forward() returns (the host's part of
a tail was 0.03-0.14 ms on the H200 with builds alongside): in a window of several calls that work
would overlap the next calls' (a relu that spun 2 ms on a new stream per call timed 0.29 ms per
call in windows of many, H200, 2026-12-02), so such a program gets one call per window."""
STABLE = 0.01
SE_FACTOR = 2.0
"""Noise is at least this many standard errors of the median (about a 95% interval)."""
HOST_ENDS = 2.0
"""A window's host time is its tail and its first launch, about as long as each other: noise is
at least this many tails' share of the time per call. On the H200 with 8 builds alongside (run 15,
docs/benchmarks.md P3) it came to 0.5-1.3%, 0.75-2.2% and 0.6-2.3% for kernels whose medians
spread 1.07%, 1.74% and 1.71% over three evaluations; the passes' difference and the standard
error came to 0.04-0.3%."""


def min_trials(options: Any, device_type: str) -> int:
    """The least timed samples: `options.timing_trials`, or the device's `MIN_TRIALS`."""
    return _per_device(options.timing_trials, MIN_TRIALS, device_type)


def max_trials(options: Any, device_type: str) -> int:
    """The most timed samples a program gets: `timing_max_trials`, or 4 x `timing_trials` where
    that is set, or the device's `MAX_TRIALS`; never fewer than the least."""
    asked = options.timing_max_trials or (4 * options.timing_trials if options.timing_trials else None)
    return max(_per_device(asked, MAX_TRIALS, device_type), min_trials(options, device_type))


def _per_device(value: Any, table: dict[str, Any], device_type: str) -> Any:
    """`value` where the options set one, else the device's entry of `table` (cpu or cuda)."""
    return value if value is not None else table["cpu" if device_type == "cpu" else "cuda"]


def interval_ms(options: Any, device_type: str) -> float:
    """The target sample length: `options.interval_ms`, or the device's `INTERVAL_MS`."""
    return _per_device(options.interval_ms, INTERVAL_MS, device_type)


def max_calls(options: Any, device_type: str) -> int:
    """The most calls in one sample: `options.max_calls_per_interval`, or the device's `MAX_CALLS`."""
    return _per_device(options.max_calls_per_interval, MAX_CALLS, device_type)


def window_ms(elapsed_ms: float, tail_ms: float, wake_ms: float) -> float:
    """A GPU window's time: start to end event (`elapsed_ms`) less the host's wake-up from the
    device-wide synchronize before the end event, min(`tail_ms`, `wake_ms`, SIDE_TAIL_MS)
    (clocks.py). Never less than start to the end of the calls' own stream (the tail is its
    bound), and work left on other streams escapes the window by at most SIDE_TAIL_MS."""
    return elapsed_ms - max(0.0, min(tail_ms, wake_ms, SIDE_TAIL_MS))


def outlives_stream(tails: Sequence[float]) -> bool:
    """Whether single-call windows with these tails (ms) show work left on other streams."""
    return bool(tails) and statistics.median(tails) > SIDE_TAIL_MS


def calls_per_interval(call_ms: float, target_ms: float, max_calls: int, max_sets: int,
                       refill_ms: float = 0.0) -> int:
    """Calls per timed sample for a program taking `call_ms` per call, whose inputs take
    `refill_ms` of host time per call to draw (see the module docstring)."""
    if target_ms <= 0 or call_ms >= target_ms:
        return 1
    want = math.ceil(target_ms / max(call_ms, 1e-6))
    if refill_ms > 0:
        want = min(want, math.floor(target_ms / refill_ms))
    return max(1, min(want, max_calls, max_sets))


HOST_BOUND = 0.8
"""A GPU program whose host launch time per call is at least this share of its time per call is
host-bound (timing.py names it so in the result's warnings too)."""


def host_bound(launch_ms: float | None, call_ms: float) -> bool:
    """Whether calls taking `call_ms` each, launched in `launch_ms` of host time each, are bound by
    the host's launches (None: a host clock, where the question does not arise)."""
    return launch_ms is not None and call_ms > 0 and launch_ms >= HOST_BOUND * call_ms


def sizing(trials: Sequence[tuple[float, float | None]]) -> tuple[float, float | None]:
    """The time per call and the host launch time per call that size the timed samples, from
    untimed trial samples of the same calls on the same buffers, `(ms per call, launch ms per
    call or None)` each: the least of each, so a program is host-bound only when every trial
    says so. The first trial is the first use of its buffers: each call's output is allocated
    anew inside its window, and other first-use costs land there too. One such trial called the
    0.05 ms relu host-bound in each of its 12 evaluations at the 30 ms target on the H200
    (runs 36-37), whose timed samples then launched in 0.32-0.57 of the call time: the
    host-bound cap cut its calls per sample to 92-242 of the ~275 its memory allowed, a number
    that moved with the host's load, and its medians spread 1.6-3.2% over four evaluations
    (docs/benchmarks.md P3); the 0.1 ms relu (timed launches 0.15-0.30 of its call) was cut so
    in 4 of its 28 evaluations of runs 35-36."""
    per_call = min(ms for ms, _ in trials)
    launches = [launch for _, launch in trials if launch is not None]
    return per_call, min(launches) if launches else None


def spread(times: Sequence[float]) -> float | None:
    """The interquartile range relative to the median; None with fewer than 4 samples."""
    if len(times) < 4:
        return None
    median = statistics.median(times)
    if median <= 0:
        return None
    q1, _, q3 = statistics.quantiles(times, n=4)
    return (q3 - q1) / median


def median_se(times: Sequence[float]) -> float | None:
    """Relative standard error of the median: 1.2533 * sigma / sqrt(n) / median, with the robust
    sigma = IQR / 1.349 (a normal's); None with fewer than 4 samples."""
    relative_iqr = spread(times)
    return None if relative_iqr is None else 1.2533 * relative_iqr / 1.349 / math.sqrt(len(times))


def enough(times: Sequence[float], min_n: int, max_n: int, se_target: float) -> bool:
    """Whether sampling may stop (the time budget is timing.py's)."""
    if len(times) >= max_n:
        return True
    if len(times) < min_n:
        return False
    se = median_se(times)
    return se is not None and se <= se_target


def warmed_up(times: Sequence[float], window: int) -> bool:
    """The last `window` samples' median within STABLE of the `window` before them."""
    if len(times) < 2 * window:
        return False
    last = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window:-window])
    return before > 0 and abs(last - before) / before <= STABLE


def noise(a: Sequence[float], b: Sequence[float]) -> float | None:
    """The module docstring's noise; None when either pass has no sample."""
    if not a or not b:
        return None
    both = [*a, *b]
    median = statistics.median(both)
    if median <= 0:
        return None
    passes = abs(statistics.median(a) - statistics.median(b)) / median
    se = median_se(both)
    return max(passes, SE_FACTOR * se if se is not None else 0.0)


def _alternate(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """Two passes' samples back in the order they were taken: A, B, A, B, ... (A first)."""
    both = [t for pair in zip(a, b) for t in pair]
    return [*both, *a[len(b):], *b[len(a):]]


def summarize(a: Sequence[float], b: Sequence[float], clock: str, calls: int,
              launches: Sequence[float] = (), tails: Sequence[float] = (),
              wakes: Sequence[float] = ()) -> TimingStats:
    """Statistics over both passes' samples (per-call times), with each pass's median, the
    median host launch time per call (`launches`, GPU), the median window tail (`tails`, GPU,
    per window) and the median wake-up allowance (`wakes`, clocks.py)."""
    times = [*a, *b]
    std = statistics.stdev(times) if len(times) > 1 else 0.0
    passes = [statistics.median(p) for p in (a, b) if p]
    tail = statistics.median(tails) if tails else None
    spread = noise(a, b)
    if spread is not None and tail is not None and calls > 0 and statistics.median(times) > 0:
        spread = max(spread, HOST_ENDS * tail / calls / statistics.median(times))
    return TimingStats(median_ms=statistics.median(times), mean_ms=statistics.fmean(times),
                       std_ms=std, min_ms=min(times), max_ms=max(times), n=len(times), clock=clock,
                       calls_per_sample=calls, pass_medians_ms=passes if len(passes) == 2 else None,
                       noise=spread, samples_ms=_alternate(a, b),
                       launch_ms=statistics.median(launches) if launches else None,
                       tail_ms=tail, wake_ms=statistics.median(wakes) if wakes else None)
