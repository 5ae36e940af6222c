"""The constant-answer test: can the problem tell a kernel from a constant here (issue 12)?

A published kernel for Conv3d + GroupNorm + mean writes zeros and was accepted: each GroupNorm
group has zero mean, so the reference's output is ~0 for every input and zeros pass any
tolerance. Such a verdict says nothing about the kernel. So the correct job also judges answers
that ignore the input, under the same tolerance policy and on the same trials as the candidate:

- `all zeros` (the reference's shapes and dtypes);
- `the reference's output for another input set`, drawn once up front and used by no trial (a
  replayed or precomputed answer; it also catches an output that does not depend on the input
  values at all, which is degenerate too: any kernel returning that constant is "correct");
- `that output's mean everywhere` (floating-point outputs).

Each answer is compared on every regular and stress trial. One that passes on *all* of them would
have been accepted, so the problem is degenerate under this policy: a candidate that passed gets
no `ok` (`runtime_error`, with a message that says why and that it is not the candidate's fault);
a candidate that failed keeps its own verdict. A scalar output that depends on the input (a loss)
is not caught: another input set's value differs by far more than the fp64-relative allowance (a
small multiple of the fp32 reference's own error), so that answer fails on the first trial.
The fp64-relative policy keeps its scale-relative floor, which is what rejects zeros for a
393,216-column softmax whose values are all ~2.5e-6.
"""

from __future__ import annotations

from typing import Any

import torch

from feedback.result import DegenerateCheck
from feedback.worker.inputs import tensors, tree_map
from feedback.worker.tolerance import compare

ZEROS = "all zeros"
OTHER = "the reference's output for another input set"
MEAN = "that output's mean everywhere"


def _mean_fill(t: torch.Tensor) -> torch.Tensor:
    if not t.is_floating_point() or t.numel() == 0:
        return t.clone()
    return torch.full_like(t, t.double().nan_to_num(0.0, 0.0, 0.0).mean().item())


class ConstantAnswers:
    """The answers of the module docstring, judged trial by trial (`judge`)."""

    def __init__(self, policy: str, other: Any) -> None:
        self.policy = policy
        self.answers = {ZEROS: tree_map(torch.zeros_like, other), OTHER: other,
                        MEAN: tree_map(_mean_fill, other)}
        self.passing = list(self.answers)
        self.trials = 0
        self.scale = 0.0

    def judge(self, ref: Any, ref64: Any | None) -> None:
        """Compare every answer still passing with this trial's reference output."""
        self.trials += 1
        values = [t for t in tensors(ref) if t.is_floating_point() and t.numel()]
        self.scale = max([self.scale] + [float(t.abs().nan_to_num(0, 0, 0).max()) for t in values])
        self.passing = [name for name in self.passing
                        if compare(self.answers[name], ref, ref64, self.policy).ok]

    @property
    def degenerate(self) -> bool:
        return self.trials > 0 and bool(self.passing)

    def record(self) -> DegenerateCheck:
        return DegenerateCheck(answers=list(self.answers), passing=list(self.passing) if self.trials else [],
                               trials=self.trials)

    def message(self) -> str:
        return (f"degenerate problem: an answer that ignores the input ({'; '.join(self.passing)}) "
                f"passes the {self.policy} tolerance on all {self.trials} trials (largest |reference "
                f"value| {self.scale:.3g}), so a kernel cannot be told from a constant on this "
                "problem at this size; this verdict does not count and is not the candidate's fault")
