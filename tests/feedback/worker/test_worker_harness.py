"""The trusted operators' trial (harness._trusted_ops) on a bounded piece of the data."""

from __future__ import annotations

import types

import torch

from feedback.worker import guards, harness, inputs, ops, tolerance

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2, x.argmax(dim=1)   # a float and an integer output

def get_inputs():
    return [torch.randn(64, 64).t()]                 # not contiguous

def get_init_inputs():
    return []
"""


def _harness() -> types.SimpleNamespace:
    problem = types.ModuleType("trusted_trial_problem")
    exec(PROBLEM, problem.__dict__)  # noqa: S102 - the test's own problem source
    reference = problem.Model()
    return types.SimpleNamespace(problem=problem, device=torch.device("cpu"), reference=reference,
                                 reference64=problem.Model().double(), reference_s=0.0,
                                 output_sizes=[64 * 64 * 4], notes=[])


def test_the_trial_on_a_piece_records_every_operator_of_the_full_size_trial(monkeypatch):
    """Which operators the comparison, the rescalings and the input check run does not depend
    on the elements they see: the full-size trial (before `TRUSTED_HEAD`), its outputs spread
    over 16 comparison chunks, runs no operator the trial on a one-chunk piece misses."""
    monkeypatch.setattr(tolerance, "CHUNK", 256)
    monkeypatch.setattr(harness, "TRUSTED_HEAD", 200)
    h = _harness()

    def full_size() -> None:
        args = inputs.make_inputs(h.problem, h.device)
        for name in inputs.STRESS_TRANSFORMS:
            inputs.stress(args, name)
        harness._same_inputs(args, inputs.clone(args))
        ref, ref64 = harness.call_reference(h, args, want64=True)
        tolerance.every_path(ref, ref64, "fp64-relative")
        guards.poison_memory(h.device, h.output_sizes[:1], 1)

    full = ops.op_names(full_size)
    piece = harness._trusted_ops(h, None)
    assert {"aten::argmax", "aten::relu", "aten::mul", "aten::abs", "aten::max"} <= full
    assert full - piece == set()
    assert h.notes == []  # profiled, not the fallback to the reference's operators


def test_head_flattens_every_tensor_to_its_first_elements():
    values = [torch.arange(12).reshape(3, 4).t(), (torch.zeros(2), 7), {"k": torch.ones(5)}]
    few = inputs.head(values, 4)
    assert few[0].tolist() == [0, 4, 8, 1] and few[1][0].shape == (2,) and few[1][1] == 7
    assert few[2]["k"].shape == (4,)


class _Counted(torch.nn.Module):
    """The float64 twin, counting its calls."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.calls = model, 0

    def forward(self, *args):
        self.calls += 1
        return self.model(*args)


def test_an_output_equal_to_the_reference_bit_for_bit_is_judged_without_the_float64_reference():
    h = _harness()
    h.reference64 = twin = _Counted(h.reference64)
    args = inputs.make_inputs(h.problem, h.device, 7)
    ref = h.reference(*args)
    verdict = harness.judge_call(h, tuple(t.clone() for t in ref), args, "fp64-relative")
    assert verdict.ok and twin.calls == 0
    assert harness.judge_call(h, tuple(t.clone() for t in ref), args, "kernelbench").ok


def test_any_other_output_is_compared_with_the_float64_reference_as_before():
    """Within the tolerance but not the same bits (one element a step off, a zero's sign
    flipped) passes by the comparison; a wrong value, or a wrong integer output, fails it."""
    h = _harness()
    h.reference64 = twin = _Counted(h.reference64)
    args = inputs.make_inputs(h.problem, h.device, 7)
    values, index = h.reference(*args)
    at = divmod(int(values.argmax()), values.shape[1])
    near = values.clone()
    near[at] = torch.nextafter(near[at], torch.tensor(0.0))
    signed = values.clone()
    signed[values == 0] = -0.0
    assert bool((values == 0).any())
    for got in ((near, index.clone()), (signed, index.clone())):
        assert harness.judge_call(h, got, args, "fp64-relative").ok
    assert twin.calls == 2
    assert not harness.judge_call(h, (values + 1, index.clone()), args, "fp64-relative").ok
    assert not harness.judge_call(h, (values.clone(), (index + 1) % 64), args, "fp64-relative").ok
    assert twin.calls == 4
    assert not harness.judge_call(h, values.clone(), args, "fp64-relative").ok  # one output of two


def test_identical_needs_the_structure_type_dtype_and_every_bit(monkeypatch):
    monkeypatch.setattr(harness, "TRUSTED_HEAD", 100)
    x = torch.randn(1000)
    assert harness.identical([x.clone(), (x.clone(),)], (x, [x]))
    assert not harness.identical([x.clone()], [x, x])
    assert not harness.identical(x.double(), x) and not harness.identical(x.reshape(10, 100), x)
    assert not harness.identical(torch.nn.Parameter(x.clone()), x)  # a subclass
    assert not harness.identical(3, 3)  # a plain value is compare's to judge
    for at in (5, 900):  # inside the head, and only past it
        other = x.clone()
        other[at] = torch.nextafter(other[at], torch.tensor(10.0))
        assert not harness.identical(other, x)
    assert harness.identical(x.reshape(10, 100).t().contiguous().t(), x.reshape(10, 100))
    assert not harness.identical(x.reshape(10, 100).t() * 1, (x.reshape(10, 100) + 1).t())


def test_the_trusted_trial_runs_every_operator_of_a_judged_call(monkeypatch):
    """judge_call's bit-for-bit check, its head first, runs no operator the trusted operators'
    trial misses (tamper.py guards only those)."""
    monkeypatch.setattr(harness, "TRUSTED_HEAD", 200)
    h = _harness()
    args = inputs.make_inputs(h.problem, h.device, 3)
    values, index = h.reference(*args)
    same = (values.clone(), index.clone())
    big = torch.randn(4096)

    def judged() -> None:
        harness.judge_call(h, same, args, "fp64-relative")
        harness._same_bits(big, big.clone())
        harness._same_bits(big, big + 1)

    assert ops.op_names(judged) - harness._trusted_ops(h, None) == set()
