"""The `correct` job: is the candidate's output the reference's, on inputs nobody could predict?

Per trial (`options.correctness_trials` of them, fresh secret-seeded inputs each):
candidate first, on its own clones, after freed memory was poisoned; then the guards (harness.py);
then the inputs are drawn again from the same seed (when `get_inputs` is reproducible, else a
pristine copy kept aside is used) and compared bitwise with what the candidate was given; then the
reference (and its float64 twin) runs on those pristine inputs and the outputs are compared under
the tolerance policy (tolerance.py).

After all regular trials pass, a numeric stress pass (issue 4, class 14) runs one more trial per
rescaling in `inputs.STRESS_TRANSFORMS` (x*1e-2, x*16, x+5 on every floating-point input); a
rescaling whose transformed inputs break an invariant every `get_inputs()` draw had (contract.py:
exact zeros, sign, range, integers, symmetry, sums; issue 12), or whose reference output is not
finite (or raises), is skipped, and the record says why. Then one trial at an unseen size
(sizes.py; class 11: shape specialisation). Every regular and stress trial also judges answers that
ignore the input (degenerate.py): if one passes them all, a candidate that passed everything else
gets `runtime_error` "degenerate problem" instead of `ok`. What was applied, skipped and why is
recorded in `Correctness.checks`. Stress and unseen-size trials
count in `Correctness.trials`. Last, one more call under the operator recorder, judged by the
library-op policy (feedback/policy.py; class 8); every scored call before it had to run the
candidate's own code (harness.call_candidate; class 9). When the float64 reference is unavailable
the recorded tolerance is `kernelbench`'s (and a warning says why). A mismatch lets the remaining
regular trials run (so the report can say "passed 3 of 5"); a guard violation or an exception ends
the job at once.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import torch

from feedback.job import WorkerJob
from feedback.policy import library_violation
from feedback.result import Checks, Correctness, Status, StressCheck
from feedback.worker import guards, inputs, loading, phases, sizes
from feedback.worker.contract import MIN_DRAWS, Contract
from feedback.worker.degenerate import ConstantAnswers
from feedback.worker.errors import JobFailure
from feedback.worker.harness import (
    Harness,
    _float64_twin,
    call_candidate,
    call_reference,
    check_integrity,
    fresh_inputs,
    prepare,
)
from feedback.worker.ops import base_kernel_name, device_kernels, dispatched_ops
from feedback.worker.tolerance import Comparison, compare, tolerance_for


class Tally:
    """Accumulates per-trial comparisons into one `Correctness` record.

    The worst trial shown is the first failing one, else the one closest to its tolerance.
    Error statistics cover the trials whose values were compared (not shape mismatches).
    """

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.trials = self.passed = self.compared = 0
        self.worst: Comparison | None = None
        self.first_failure: Comparison | None = None
        self.max_abs = self.max_rel = self.sum_abs = self.sum_rel = 0.0
        self.dtype: torch.dtype = torch.float32
        self.fallback = False  # float64 reference unavailable: kernelbench numbers were used
        self.contract = Contract()
        self.answers: ConstantAnswers | None = None
        self.stress: list[StressCheck] = []
        self.weights: str | None = None
        self.unseen: str | None = None

    def add(self, verdict: Comparison, output: Any) -> None:
        self.trials += 1
        self.passed += verdict.ok
        self.fallback = self.fallback or any("kernelbench tolerance used" in n for n in verdict.notes)
        floats = [t.dtype for t in inputs.tensors(output) if t.is_floating_point()]
        self.dtype = floats[0] if floats else self.dtype
        if verdict.worst_index is not None:
            self.compared += 1
            self.max_abs, self.max_rel = max(self.max_abs, verdict.max_abs), max(self.max_rel, verdict.max_rel)
            self.sum_abs, self.sum_rel = self.sum_abs + verdict.mean_abs, self.sum_rel + verdict.mean_rel
        if not verdict.ok and self.first_failure is None:
            self.first_failure = self.worst = verdict
        elif self.first_failure is None and (self.worst is None or verdict.excess >= self.worst.excess):
            self.worst = verdict

    def record(self) -> Correctness:
        w, n = self.worst, self.compared
        return Correctness(
            trials=self.trials, trials_passed=self.passed,
            max_abs_err=self.max_abs if n else None, mean_abs_err=self.sum_abs / n if n else None,
            max_rel_err=self.max_rel if n else None, mean_rel_err=self.sum_rel / n if n else None,
            worst_index=w.worst_index if w else None,
            expected_at_worst=w.expected if w else None, got_at_worst=w.got if w else None,
            tolerance=tolerance_for("kernelbench" if self.fallback else self.policy, self.dtype),
            checks=Checks(draws=self.contract.draws, invariants=self.contract.describe(),
                          stress=list(self.stress), weights=self.weights, unseen_size=self.unseen,
                          degenerate=self.answers.record() if self.answers else None))


def run_correct(job: WorkerJob) -> tuple[Correctness, list[str], dict[str, int] | None]:
    """Run every trial; returns the record, warnings and the operators one passing call
    dispatched (ops.py), or raises `JobFailure`."""
    policy = job.options.tolerance
    tolerance_for(policy, torch.float32)  # an unknown policy fails before any work
    h = prepare(job, with64=policy == "fp64-relative")
    tally = Tally(policy)
    tally.weights = h.weight_rule
    held: Any = ()
    try:
        with phases.timed("trials"):
            tally.answers = ConstantAnswers(policy, _other_output(h, tally.contract))
            for _ in range(job.options.correctness_trials):
                verdict, held = run_trial(h, policy, None, held, tally=tally)
                tally.add(verdict, held)
            while tally.contract.draws < MIN_DRAWS:
                tally.contract.observe(fresh_inputs(h, inputs.secret_seed()))
        if tally.first_failure is None:
            with phases.timed("stress"):
                held = _stress_trials(h, policy, held, tally)
        if tally.first_failure is None:
            with phases.timed("unseen_size"):
                verdict, held = unseen_size_trial(h, policy, held, tally)
            if verdict is not None:
                tally.add(verdict, held)
    except JobFailure as failure:
        failure.correctness = tally.record()
        raise
    if tally.first_failure is not None:
        first = tally.first_failure
        message = (f"{first.message} (passed {tally.passed} of {tally.trials} trials)"
                   if first.status == Status.mismatch else first.message)
        if first.status == Status.mismatch and tally.weights and "reshaped" in tally.weights:
            message += (f" (the reference's weights were copied {tally.weights}; a transposed or "
                        "permuted layout is not a reshape: keep the reference's layout)")
        raise JobFailure(first.status, message, tally.record())
    with phases.timed("ops"):
        ops = _record_ops(h)
    if ops is not None:
        with phases.timed("kernels"):  # a profiled call: CUPTI's start-up is most of it
            foreign = _foreign_kernels(h)
        problem = library_violation(job.options.library_ops, ops, h.reference_ops, foreign)
        if problem:
            raise JobFailure(Status.guard_violation, problem, tally.record())
    if tally.answers.degenerate:
        raise JobFailure(Status.runtime_error, tally.answers.message(), tally.record())
    return tally.record(), sorted(set(h.notes)), ops


def _stress_trials(h: Harness, policy: str, held: Any, tally: Tally) -> Any:
    """The numeric stress trials (inputs.STRESS_TRANSFORMS) up to the first failure; returns the
    output now held."""
    for name in inputs.STRESS_TRANSFORMS:
        verdict, out = run_trial(h, policy, name, held, tally=tally)
        if verdict is None:
            continue
        held = out
        tally.add(verdict, out)
        if not verdict.ok:
            verdict.message = f"numeric stress pass (inputs {name}): {verdict.message}"
            break
    return held


def _other_output(h: Harness, contract: Contract) -> Any:
    """The reference's output for an input set no trial uses (degenerate.py); the draw also
    counts for the input contract."""
    args = fresh_inputs(h, inputs.secret_seed())
    contract.observe(args)
    try:
        return call_reference(h, args, want64=False)[0]
    except Exception as exc:
        raise JobFailure(Status.runtime_error, f"the reference program failed: {exc!r}") from exc


def _foreign_kernels(h: Harness) -> list[str]:
    """GPU only: kernels of one candidate call that are not its own (profiling.py's name rule)."""
    if h.device.type != "cuda" or h.job.options.library_ops == "allow":
        return []
    try:
        args = fresh_inputs(h, inputs.secret_seed())
        with torch.no_grad():
            kernels = device_kernels(lambda: h.candidate(*args))
        source = Path(h.job.candidate_path).read_text(errors="replace")
    except Exception as exc:
        h.notes.append(f"device kernels not recorded: {exc!r}")
        return []
    check_integrity(h, "after the kernel-recording call")
    identifiers = set(re.findall(r"[A-Za-z_]\w*", source))
    return [k for k in kernels if base_kernel_name(k) not in identifiers]


def unseen_size_trial(h: Harness, policy: str, held: Any,
                      tally: Tally | None = None) -> tuple[Comparison | None, Any]:
    """One trial at a size the candidate was not told about (sizes.py), with models rebuilt there.

    A mismatch or a shape mismatch says it was the unseen size, so the model learns what to fix."""
    for described, problem in sizes.candidates(h.job.problem, h.job.options.size):
        try:
            module = loading.load_problem(problem, sizes.EXTRA)
            reference, init_inputs, seed = loading.build_reference(module, h.device)
            other = dataclasses.replace(h, problem=module, reference=reference, init_inputs=init_inputs,
                                        seed=seed, reference64=None)
            if h.reference64 is not None:
                other.reference64 = _float64_twin(other)
            args = inputs.make_inputs(module, h.device)
            with torch.no_grad():
                out = reference(*args)
        except Exception as exc:  # the reference cannot run there: try the next size
            h.notes.append(f"unseen size {described} skipped: the reference raised {exc!r}")
            continue
        other.output_sizes = [t.untyped_storage().nbytes() for t in inputs.tensors(out)]
        other.io_bytes = inputs.nbytes(args) + inputs.nbytes(out)
        other.candidate = loading.build_candidate(h.candidate_module, reference, init_inputs, seed,
                                                  h.device)
        if tally is not None:
            tally.unseen = described
        try:
            verdict, output = run_trial(other, policy, None, held,
                                        label=f"the unseen size ({described})")
        except JobFailure as failure:
            if failure.status == Status.runtime_error:
                failure.message = (f"at an unseen size ({described}; shape specialisation?): "
                                   f"{failure.message}")
            raise
        if verdict is not None and not verdict.ok:
            verdict.message = (f"at an unseen size ({described}; shape specialisation?): "
                               f"{verdict.message}")
        h.notes.extend(n for n in other.notes if n not in h.notes)
        return verdict, output
    h.notes.append("no unseen size checked (the problem has no size presets to vary)")
    return None, held


def _record_ops(h: Harness) -> dict[str, int] | None:
    """One more call, under an operator recorder; informational, so a failure is only noted."""
    try:
        ops = dispatched_ops(h.candidate, fresh_inputs(h, inputs.secret_seed()))
    except Exception as exc:
        h.notes.append(f"dispatched operators not recorded: {exc!r}")
        return None
    check_integrity(h, "after the operator-recording call")
    return ops


def run_trial(h: Harness, policy: str, stress: str | None, held: Any, label: str | None = None,
              tally: Tally | None = None) -> tuple[Comparison | None, Any]:
    """One trial; returns (verdict, candidate output), or (None, None) for a skipped stress trial.

    With `tally`, a regular trial's inputs feed its input contract and every trial (regular or
    stress) judges its constant answers; a stress trial runs only on inputs inside the contract."""
    seed = inputs.secret_seed()
    args = fresh_inputs(h, seed, stress)
    if stress:
        reason = _outside_contract(args, tally)
        if reason:
            return _skip(h, tally, stress, reason)
    pristine = None if h.reproducible else inputs.clone(args)
    output = call_candidate(h, args, held, label or (f"the stress trial {stress}" if stress else "a trial"))
    if pristine is None:
        pristine = fresh_inputs(h, seed, stress)
    guards.check_inputs_untouched(args, pristine)
    del args
    if tally is not None and not stress:
        tally.contract.observe(pristine)
    try:
        ref, ref64 = call_reference(h, pristine, want64=policy == "fp64-relative")
    except JobFailure:
        raise
    except Exception as exc:
        if stress:
            return _skip(h, tally, stress, f"the reference raised {exc!r}")
        raise JobFailure(Status.runtime_error, f"the reference program failed: {exc!r}") from exc
    if stress and not all(bool(torch.isfinite(t).all()) for t in inputs.tensors(ref) if t.is_floating_point()):
        return _skip(h, tally, stress, "the reference output is not finite")
    if tally is not None:
        if stress:
            tally.stress.append(StressCheck(transform=stress, applied=True))
        if tally.answers is not None:
            tally.answers.judge(ref, ref64)
    verdict = compare(output, ref, ref64, policy)
    h.notes.extend(verdict.notes)
    if not verdict.ok and verdict.status == Status.mismatch:
        verdict.message += hint(output, ref, held, verdict)
    return verdict, output


def _outside_contract(args: Any, tally: Tally | None) -> str | None:
    """Why a stress trial's transformed inputs may not be used, or None when they may."""
    if not any(t.is_floating_point() for t in inputs.tensors(args)):
        return "no floating-point input to transform"
    broken = tally.contract.broken(args) if tally is not None else []
    if broken:
        shown = "; ".join(broken[:4]) + (f"; and {len(broken) - 4} more" if len(broken) > 4 else "")
        return f"the transformed inputs break the input contract: {shown}"
    return None


def _skip(h: Harness, tally: Tally | None, stress: str, reason: str) -> tuple[None, None]:
    h.notes.append(f"stress pass {stress} skipped: {reason}")
    if tally is not None:
        tally.stress.append(StressCheck(transform=stress, applied=False, reason=reason))
    return None, None


def _unwritten(got: torch.Tensor, ref: torch.Tensor, scale: float) -> bool:
    """NaN (the poison), values far beyond any the reference has, or a stretch of zeros (fresh
    pages) spanning every wrong element, where the reference is finite."""
    finite = torch.isfinite(ref)
    wild = torch.isnan(got) | (got.abs() > 1e6 * max(scale, 1e-30))
    if bool((wild & finite).any()):
        return True
    flat_got, flat_ref = got.flatten(), ref.flatten()
    wrong = torch.nonzero(flat_got != flat_ref).flatten()
    if wrong.numel() < 16:
        return False
    span = flat_got[int(wrong[0]):int(wrong[-1]) + 1]
    return bool((span == 0).all())


def hint(output: Any, ref: Any, held: Any, verdict: Comparison) -> str:
    """Name the likely trick behind a mismatch, so the model learns from it (issue 4)."""
    got, want = inputs.tensors(output), inputs.tensors(ref)
    pairs = [(g, r) for g, r in zip(got, want) if g.shape == r.shape and g.is_floating_point()
             and r.is_floating_point()]
    scale = max((float(r.abs().nan_to_num(0, 0, 0).max()) for _, r in pairs if r.numel()), default=0.0)
    if any(_unwritten(g, r, scale) for g, r in pairs):
        return (" (NaN or garbage where the reference has numbers: memory the candidate never "
                "wrote still holds the evaluator's poison or stale bytes; an output from empty() "
                "not fully written, a partial write or a kernel that did not run)")
    previous = inputs.tensors(held)
    if len(previous) == len(got) and got and all(
            p.shape == g.shape and p.dtype == g.dtype and guards._bitwise_equal(p, g)
            for p, g in zip(previous, got)):
        return " (identical to the previous call's output for other inputs: a replayed or memoised result)"
    if scale > 0 and 2e-4 <= verdict.max_abs / scale <= 3e-2:
        return (" (errors of this size come from reduced precision, fp16/bf16/TF32 inside an "
                "fp32 problem, or from an approximate formula)")
    return ""
