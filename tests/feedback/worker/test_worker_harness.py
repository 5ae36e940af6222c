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
