"""`EvalOptions`: every knob of one evaluation, in one object the CLI fills and the API accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Backend = Literal["cuda", "triton", "cpp"]


def default_cache_dir() -> Path:
    """Compile cache shared by all runs on this machine (override with KERNEL_REFINE_CACHE)."""
    import os

    return Path(os.environ.get("KERNEL_REFINE_CACHE", Path.home() / ".cache" / "kernel-refine"))


class EvalOptions(BaseModel):
    """How to evaluate. Defaults are the honest setting; presets reproduce published harnesses."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    device: str = Field(default="cuda:0", description="Device for cuda/triton; ignored by cpp.")
    size: str | None = Field(default=None, description="Problem size preset (e.g. `small`).")
    tolerance: str = Field(default="fp64-relative",
                           description="`fp64-relative`, `kernelbench` (1e-4) or `kernelbench-v0` (1e-2).")
    correctness_trials: int = Field(default=5, ge=1, description="Fresh input sets checked.")
    timing_trials: int | None = Field(default=None, ge=1, description="Least number of timed "
                                      "samples (intervals) per program; more are taken until "
                                      "`timing_se` is met. None: 10 on a GPU (samples of 30 ms), "
                                      "100 on the cpp backend (sampling.MIN_TRIALS).")
    timing_max_trials: int | None = Field(default=None, ge=1, description="Most timed samples per "
                                          "program; None: 4 x `timing_trials`, or without it 120 on "
                                          "a GPU and 400 on the cpp backend (sampling.MAX_TRIALS).")
    timing_se: float = Field(default=0.002, ge=0, description="Stop sampling once the relative "
                             "standard error of the median is at most this (0: take the most).")
    timing_budget_s: float = Field(default=10.0, gt=0, description="Stop sampling after this many "
                                   "seconds of timed intervals, whatever the standard error.")
    interval_ms: float | None = Field(default=None, ge=0, description="Target length of one "
                                      "timed sample: a program shorter than this runs several "
                                      "calls back to back per sample (each on its own fresh "
                                      "inputs), so the window's fixed host time (the first launch, "
                                      "the wake-up from the device-wide synchronize) is spread "
                                      "over them; 0: one call each; None: 30 ms on a GPU, 2 ms on "
                                      "the cpp backend (sampling.INTERVAL_MS).")
    max_calls_per_interval: int | None = Field(default=None, ge=1, description="Most calls in one "
                                               "sample; None: 512 on a GPU, 64 on the cpp backend "
                                               "(sampling.MAX_CALLS).")
    warmup: int = Field(default=5, ge=0, description="Untimed calls before timing (then untimed "
                        "samples until their times are stable, for up to `warmup_s`).")
    warmup_s: float = Field(default=2.0, ge=0, description="Most seconds of warm-up samples.")
    warmup_window: int = Field(default=3, ge=1, description="Warm-up is over once the median of "
                               "the last this many untimed samples is within 1% of the median "
                               "of as many before them (so at least twice this many samples). "
                               "3 against 5 on an H100 with 6 builds alongside (runs 70 and 73, "
                               "docs/benchmarks.md P3): medians within 0.22%, worst spread over "
                               "8 evaluations 1.46% against 1.92%.")
    input_sets: int = Field(default=4, ge=1, description="Input sets rotated through timed calls "
                            "(at least as many as calls in one sample).")
    isolate_cores: bool = Field(default=True, description="The timing worker on CPU cores of its "
                                "own, builds on the others at lower priority (feedback/cores.py).")
    settle_ms: float = Field(default=0.0, ge=0, description="GPU: trusted device work (cache "
                             "flushes) for this long before the first call, so a timing process "
                             "starts at the clocks of a busy GPU, not an idle one (an experiment "
                             "for the timing-stability target; off until measured to help).")
    flush_ahead: bool = Field(default=False, description="GPU: record a sample's start event "
                              "right after its L2 flush is queued, not after the device went idle "
                              "(as triton's do_bench does): the host then launches the first call "
                              "while the flush runs, so its launch time is outside the window. An "
                              "experiment for the timing-stability target, off until measured to "
                              "help: work a candidate puts on another stream may then begin up to "
                              "one flush (~0.1 ms on an H200) before the start event.")
    trusted_lead: bool = Field(default=True, description="GPU: the baselines' windows (eager "
                               "and torch.compile of the reference: trusted code) start behind "
                               "a trusted spin of twice the host's time a call (0.05-1 ms), so "
                               "the device does not wait inside the window for the host to "
                               "launch the first call (0.15-0.19 ms of host time for a compiled "
                               "program on an H100). Measured on all 41 candidates twice each way "
                               "on one H100 (runs 106-109): the baselines' medians between two "
                               "runs differ by 0.19% / 0.22% in the median (compiled / eager; "
                               "0.63% / 0.26% without), at most 1.5% / 2.2% (4.3% / 4.2%); the "
                               "compiled programs' samples fall by a third. The compiled "
                               "medians drop by 3.8% in the median (eager 1.0%). The candidate's "
                               "windows are unchanged, since work it puts on another stream "
                               "could begin during such a lead: its window still holds its first "
                               "launch (about 0.06 ms), which errs against the candidate.")
    wake_after_wait: bool = Field(default=True, description="GPU: a window shorter than half "
                                  "the target sample length (its calls' inputs fill the memory) "
                                  "takes as its wake-up allowance the host's wake-up after a "
                                  "trusted wait as long as the window, measured before the "
                                  "samples and before every 4th, when longer than the one after "
                                  "the flush (timing.py, `_WaitedWakes`). On the H200 with builds "
                                  "alongside it cut a 1.7 ms relu's spread over five evaluations "
                                  "from 1.48% to 1.02% (docs/benchmarks.md, P3, run 35).")
    time: bool = Field(default=True, description="Run the timing stage.")
    baselines: bool = Field(default=True, description="Time the eager (and compile) references.")
    compile_baseline: bool = Field(default=True, description="Also time torch.compile of the reference.")
    compile_mode: str = Field(default="default", description="torch.compile mode for the baseline.")
    profile: bool = Field(default=False, description="Run the profiler stage (for P feedback).")
    cpu_threads: int = Field(default=1, ge=1, description="torch threads on the cpp backend.")
    compile_timeout_s: float = Field(default=600.0, description="Limit for building the candidate.")
    run_timeout_s: float = Field(default=120.0, description="Limit for one correctness/timing child.")
    memory_limit_mb: int = Field(default=8192, description="Host memory limit for candidate children.")
    cache_dir: Path = Field(default_factory=default_cache_dir, description="Compile and timing cache.")
    arch: str | None = Field(default=None, description="CUDA arch list (e.g. `9.0`); None = detected.")
    peak_tflops: float | None = Field(default=None, description="Device peak (fp32 TFLOP/s) for the "
                                      "roofline; None = the known-GPU table.")
    peak_bandwidth_gbs: float | None = Field(default=None, description="Device memory bandwidth "
                                             "(GB/s) for the roofline; None = the known-GPU table.")
    library_ops: Literal["strict", "glue", "allow"] = Field(
        default="glue", description="Library-op policy (feedback/policy.py): `glue` refuses a "
        "candidate whose library calls redo the reference or whose own kernel never runs; `strict` "
        "allows only glue ops (empty, view, reshape, ...); `allow` is KernelBench's rule.")
