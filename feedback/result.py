"""`EvalResult` and the records inside it: everything one evaluation measured.

An unmeasured quantity is `None`, never a fake zero.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class Status(str, Enum):
    """Outcome of an evaluation; the first failing stage decides it."""

    ok = "ok"
    static_reject = "static_reject"
    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    shape_mismatch = "shape_mismatch"
    mismatch = "mismatch"
    guard_violation = "guard_violation"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TimingStats(_Record):
    """Per-call times of one program over `n` timed trials, in milliseconds."""

    median_ms: float = Field(description="Median over trials; the figure speedups use.")
    mean_ms: float = Field(description="Mean over trials.")
    std_ms: float = Field(description="Standard deviation over trials.")
    min_ms: float = Field(description="Fastest trial.")
    max_ms: float = Field(description="Slowest trial.")
    n: int = Field(description="Number of timed trials.")
    clock: str = Field(description="`cuda_events` on a GPU, `host_wall` on the cpp backend.")
    sm_clock_mhz: list[int] | None = Field(default=None, description="GPU: the SM clock (NVML) "
                                           "before the first and after the last timed call.")
    calls_per_sample: int = Field(default=1, description="Calls run back to back in one timed "
                                  "sample (each on fresh inputs); the times are per call.")
    pass_medians_ms: list[float] | None = Field(default=None, description="Medians of the two "
                                                "interleaved timing passes (own input buffers each).")
    launch_ms: float | None = Field(default=None, description="GPU: median host time per call "
                                    "from the start event's record to the last call's return. "
                                    "Near `median_ms`, the window timed the host's launches (or "
                                    "a wait inside forward()), not only the device.")
    tail_ms: float | None = Field(default=None, description="GPU: median, per timed window, of "
                                  "the time from the end of the calls' work on their own stream "
                                  "to the end event (recorded after a device-wide synchronize): "
                                  "the host's wake-up plus work left on other streams.")
    wake_ms: float | None = Field(default=None, description="GPU: median, per timed window, of "
                                  "the host's wake-up from a device-wide synchronize on trusted "
                                  "work just before the window; each window's time excludes "
                                  "min(tail, wake, 0.25 ms) of its tail (feedback/worker/clocks.py).")
    samples_ms: list[float] | None = Field(default=None, description="The per-call time of each "
                                           "timed sample in the order taken (passes A and B "
                                           "alternate, A first): the figures above are over these.")
    noise: float | None = Field(default=None, description="Between-evaluation variation estimated "
                                "inside this one: max(|pass A - pass B| / median, 2 x standard "
                                "error of the median, and on a GPU 2 x `tail_ms` / calls per "
                                "sample / median, the window's host share).")


class Tolerance(_Record):
    """The correctness policy a result was judged under (recorded in every result)."""

    policy: str = Field(description="Preset name: `fp64-relative` (default), `kernelbench`, `kernelbench-v0`.")
    atol: float = Field(description="Absolute tolerance (or floor, for the fp64-relative policy).")
    rtol: float = Field(description="Relative tolerance (or the allowed factor, for fp64-relative).")


class StressCheck(_Record):
    """One transform of the numeric stress pass, and whether it ran (feedback/worker/contract.py)."""

    transform: str = Field(description="The transform of the floating-point inputs, e.g. `x*16`.")
    applied: bool = Field(description="True when a trial ran on the transformed inputs.")
    reason: str | None = Field(default=None, description="Why it was skipped: the input invariant "
                               "it would break, a non-finite or failing reference, no float input.")


class DegenerateCheck(_Record):
    """Would an answer that ignores the input pass (feedback/worker/degenerate.py)?"""

    answers: list[str] = Field(description="Input-independent answers tried on every judged trial.")
    passing: list[str] = Field(default_factory=list, description="Those that passed on every trial: "
                               "non-empty means the problem is degenerate under this tolerance.")
    trials: int = Field(default=0, description="Trials the answers were judged on.")


class Checks(_Record):
    """Which checks a correctness verdict rests on, so a researcher can audit it (issue 12)."""

    draws: int = Field(default=0, description="get_inputs() draws the input invariants were inferred from.")
    invariants: list[str] = Field(default_factory=list, description="Structure every draw had "
                                  "(exact zeros, sign, range, integer values, symmetry, sums).")
    stress: list[StressCheck] = Field(default_factory=list, description="Stress transforms, used or "
                                      "skipped and why.")
    weights: str | None = Field(default=None, description="The weight-copy rule that was used "
                                "(feedback/worker/loading.py), and any reshaped pairs.")
    degenerate: DegenerateCheck | None = Field(default=None, description="The constant-answer test.")
    unseen_size: str | None = Field(default=None, description="The unseen size checked, None if none.")


class Correctness(_Record):
    """What the correctness stage compared and found."""

    trials: int = Field(description="Input sets tried (fresh, secret-seeded inputs each).")
    trials_passed: int = Field(description="Input sets on which every check passed.")
    max_abs_err: float | None = Field(default=None, description="Largest |candidate - reference|.")
    mean_abs_err: float | None = Field(default=None, description="Mean |candidate - reference|.")
    max_rel_err: float | None = Field(default=None, description="Largest relative error.")
    mean_rel_err: float | None = Field(default=None, description="Mean relative error.")
    worst_index: list[int] | None = Field(default=None, description="Index of the worst element.")
    expected_at_worst: float | None = Field(default=None, description="Reference value there.")
    got_at_worst: float | None = Field(default=None, description="Candidate value there.")
    tolerance: Tolerance | None = Field(default=None, description="Policy used.")
    checks: Checks | None = Field(default=None, description="The checks this verdict rests on.")


class ProfileRow(_Record):
    """One operator or kernel in a torch.profiler breakdown."""

    name: str = Field(description="Operator or kernel name.")
    self_time_us: float = Field(description="Self device time (CPU time on cpp) summed over calls, µs.")
    count: int = Field(description="Number of calls observed.")
    share: float = Field(description="Fraction of the total self time in this breakdown.")
    own: bool = Field(default=False, description="True when this is a kernel the candidate compiled itself.")


class Profile(_Record):
    """A torch.profiler breakdown of a few calls."""

    rows: list[ProfileRow] = Field(description="Top operators/kernels by self time, largest first.")
    own_share: float | None = Field(
        default=None, description="Share of device time in kernels the candidate compiled itself."
    )
    device: str = Field(description="`cuda` or `cpu`: which time the rows count.")


class Roofline(_Record):
    """Speed-of-light bound for the problem on this device."""

    flops: float | None = Field(default=None, description="FLOPs of one forward (torch flop counter).")
    min_bytes: float | None = Field(default=None, description="Inputs + outputs + parameters, each once.")
    sol_ms: float | None = Field(default=None, description="max(flops/peak, bytes/bandwidth), ms.")
    fraction: float | None = Field(default=None, description="sol_ms / candidate median (<= 1 if honest).")
    suspicious: bool = Field(default=False, description="The candidate beat the speed of light.")


class Environment(_Record):
    """Where the evaluation ran."""

    device: str = Field(description="GPU name, or the CPU model on the cpp backend.")
    driver: str | None = Field(default=None, description="NVIDIA driver version.")
    torch: str = Field(description="torch.__version__.")
    cuda: str | None = Field(default=None, description="torch.version.cuda.")
    compiler: str | None = Field(default=None, description="nvcc / c++ version line.")
    python: str = Field(description="Python version.")
    hostname: str | None = Field(default=None, description="Machine name.")


class EvalResult(_Record):
    """Everything one evaluation of one candidate produced."""

    status: Status = Field(description="Outcome; `ok` means compiled, correct and timed.")
    stage: str | None = Field(default=None, description="The failing stage (`static`, `compile`, "
                              "`correct`, `timing`, `profile`), None when ok.")
    message: str = Field(default="", description="Cleaned, bounded message of the failing stage.")
    backend: str = Field(description="`cuda`, `triton` or `cpp`.")
    problem_id: str = Field(description="Problem evaluated.")
    code_hash: str = Field(description="sha256 of the candidate source.")
    size: str | None = Field(default=None, description="Size preset used (None = the problem's default).")
    correctness: Correctness | None = Field(default=None, description="Correctness detail when checked.")
    runtime: TimingStats | None = Field(default=None, description="Candidate timing.")
    eager: TimingStats | None = Field(default=None, description="Eager reference timing.")
    compiled: TimingStats | None = Field(default=None, description="torch.compile reference timing.")
    speedup_eager: float | None = Field(default=None, description="eager median / candidate median.")
    speedup_compile: float | None = Field(default=None, description="compile median / candidate median.")
    noise: float | None = Field(default=None, description="Relative timing noise of the candidate: "
                                "its between-evaluation variation estimated inside this evaluation "
                                "(`TimingStats.noise`); progress must exceed it.")
    profile: Profile | None = Field(default=None, description="Candidate profile (P feedback).")
    reference_profile: Profile | None = Field(default=None, description="Reference profile.")
    roofline: Roofline | None = Field(default=None, description="Speed-of-light analysis.")
    warnings: list[str] = Field(default_factory=list, description="Non-fatal findings.")
    environment: Environment | None = Field(default=None, description="Where it ran.")
    stage_seconds: dict[str, float] = Field(default_factory=dict, description="Wall time per stage.")

    @property
    def correct(self) -> bool:
        """True when the candidate passed correctness (it may still lack timing)."""
        return self.status == Status.ok

    def summary(self) -> str:
        """A few lines for a person at a terminal (the CLI without --json)."""
        size = f", size {self.size}" if self.size else ""
        lines = [f"{self.problem_id} [{self.backend}{size}]: {self.status.value}"
                 + (f" at {self.stage}" if self.stage else "")]
        if self.correctness:
            c = self.correctness
            lines.append(f"  correct on {c.trials_passed}/{c.trials} trials "
                         f"(max abs err {c.max_abs_err})")
        if self.runtime:
            text = f"  runtime {self.runtime.median_ms:.4f} ms (median of {self.runtime.n})"
            for name, base, speed in (("eager", self.eager, self.speedup_eager),
                                      ("compile", self.compiled, self.speedup_compile)):
                if base and speed:
                    text += f"; {name} {base.median_ms:.4f} ms -> {speed:.2f}x"
            lines.append(text)
        lines += [f"  warning: {w}" for w in self.warnings]
        lines.append("  seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in self.stage_seconds.items()))
        return "\n".join(lines + ([self.message] if self.message else []))
