"""Can a problem tell a kernel from a constant? Degeneracy tests of its reference (issue 12).

A published all-zeros kernel for Conv3d + GroupNorm + mean passed correctness at 7.8x: the
reference's output is ~0 for every input, so zeros are within any tolerance. `check_problem` runs
the reference (trusted problem code, in this process; no candidate is involved) on `trials` input
sets under fresh seeds, with one set of weights and its float64 twin, and reports:

- `non-finite reference`: NaN or inf in an output (a verdict would compare NaN patterns only);
- `output identical across input sets`: it does not depend on the input values at all;
- `<answer> within tolerance on every input set`, for answers that ignore the input: all zeros,
  the reference's output for one more input set, that output's mean everywhere.

Tolerances: `fp64-relative` (the evaluator's default: per output tensor, every
`|answer - ref64| <= 16 E + max(1e-5, 8 eps) S`, with E the fp32 reference's own worst error and
S the largest |ref64|; the rule and its reasons are in feedback/worker/tolerance.py),
`kernelbench` (`|answer - ref| <= 1e-4 + 1e-4 |ref|`, 1e-2 for fp16/bf16) and `kernelbench-v0`
(1e-2). The evaluator runs the same answers inside every correct job, on its own trials and
stress trials (feedback/worker/degenerate.py); this is the screen over a suite before a run. It
does not know the stress pass, so it can call degenerate a problem whose stress trials would
still tell zeros apart (a very wide softmax under 1e-2).
"""

from __future__ import annotations

import copy
import secrets
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from problems.module import load_module
from problems.record import Problem

TOLERANCES = ("fp64-relative", "kernelbench", "kernelbench-v0")
ANSWERS = ("all zeros", "the reference's output for another input set", "that output's mean everywhere")


class ProblemCheck(BaseModel):
    """The degeneracy findings of one problem at one size on one device."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(description="Problem id.")
    size: str | None = Field(default=None, description="Size preset (None = default).")
    device: str = Field(description="Where the reference ran.")
    tolerance: str = Field(description="Tolerance the constant answers were judged under.")
    trials: int = Field(description="Input sets judged (one more was drawn for the answers).")
    scale: float | None = Field(default=None, description="Largest |reference output| seen.")
    findings: list[str] = Field(default_factory=list, description="Why the problem is degenerate; "
                                "empty when it is not.")
    error: str | None = Field(default=None, description="Why the check could not run.")

    @property
    def degenerate(self) -> bool:
        return bool(self.findings)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _draw(module: Any, device: torch.device) -> list[Any]:
    torch.manual_seed(secrets.randbits(63))
    try:
        with torch.device(device):
            values = list(module.get_inputs())
    except Exception:  # noqa: BLE001 - a get_inputs that cannot draw there is drawn on the CPU
        values = list(module.get_inputs())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _within(answer: Any, ref: Any, ref64: Any, tolerance: str) -> bool:
    """One output leaf: is `answer` accepted against the reference under `tolerance`?"""
    if not isinstance(ref, torch.Tensor):
        return answer == ref
    if answer.shape != ref.shape:
        return False
    if not ref.is_floating_point():
        return bool(torch.equal(answer, ref))
    finite = torch.isfinite(ref)
    got, want = answer.double()[finite], ref.double()[finite]
    if want.numel() == 0:
        return True
    if tolerance == "fp64-relative" and isinstance(ref64, torch.Tensor):
        exact = ref64.double()[finite]
        own_error = (want - exact).abs().max().item()
        floor = max(1e-5, 8 * torch.finfo(ref.dtype).eps) * exact.abs().max().item()
        return bool(((got - exact).abs() <= 16 * own_error + floor + 1e-300).all())
    half = ref.dtype in (torch.float16, torch.bfloat16)
    value = 1e-2 if tolerance == "kernelbench-v0" or half else 1e-4
    return bool(((got - want).abs() <= value + value * want.abs()).all())


def _answers(other: list[Any]) -> dict[str, list[Any]]:
    def mean(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            return torch.full_like(t, t.double().nan_to_num(0, 0, 0).mean().item())
        return t
    zeros = [torch.zeros_like(t) if isinstance(t, torch.Tensor) else t for t in other]
    return dict(zip(ANSWERS, (zeros, other, [mean(t) for t in other]), strict=True))


def check_problem(problem: Problem, *, device: str = "cpu", size: str | None = None,
                  tolerance: str = "fp64-relative", trials: int = 3) -> ProblemCheck:
    """The findings of the module docstring for `problem`; an error is recorded, never raised."""
    if tolerance not in TOLERANCES:
        raise ValueError(f"unknown tolerance {tolerance!r} (known: {', '.join(TOLERANCES)})")
    record = {"id": problem.id, "size": size, "device": device, "tolerance": tolerance, "trials": trials}
    try:
        outputs, outputs64 = _run(problem, torch.device(device), size, trials + 1)
    except Exception as exc:  # noqa: BLE001 - reported per problem, the sweep goes on
        return ProblemCheck(**record, error=f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
    floats = [t for out in outputs for t in out if isinstance(t, torch.Tensor) and t.is_floating_point()]
    scale = max((t.double().abs().nan_to_num(0, 0, 0).max().item() for t in floats if t.numel()), default=None)
    findings = []
    if any(not bool(torch.isfinite(t).all()) for t in floats):
        findings.append("non-finite reference (NaN or inf in an output)")
    first = outputs[0]
    if all(len(out) == len(first) and all(_same(a, b) for a, b in zip(out, first)) for out in outputs[1:]):
        findings.append("output identical across input sets (it does not depend on the input values)")
    for name, answer in _answers(first).items():
        if all(all(_within(a, r, r64, tolerance) for a, r, r64 in zip(answer, out, out64))
               for out, out64 in zip(outputs[1:], outputs64[1:])):
            findings.append(f"{name} within the {tolerance} tolerance on every input set")
    return ProblemCheck(**record, scale=scale, findings=findings)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return a == b


def _run(problem: Problem, device: torch.device, size: str | None,
         draws: int) -> tuple[list[list[Any]], list[list[Any]]]:
    """Outputs of the reference (and of its float64 twin, None leaves when it cannot run)."""
    module = load_module(problem, size)
    seed = secrets.randbits(63)
    torch.manual_seed(seed)
    init = list(module.get_init_inputs())
    torch.manual_seed(seed)
    model = module.Model(*init).to(device).eval()
    try:
        twin = copy.deepcopy(model).double()
    except Exception:  # noqa: BLE001
        twin = None
    outputs, outputs64 = [], []
    with torch.no_grad():
        for _ in range(draws):
            args = _draw(module, device)
            out = _leaves(model(*args))
            outputs.append(out)
            try:
                doubles = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                           for a in args]
                outputs64.append(_leaves(twin(*doubles)) if twin is not None else [None] * len(out))
            except Exception:  # noqa: BLE001 - no float64 twin: the kernelbench numbers apply
                outputs64.append([None] * len(out))
    return outputs, outputs64
