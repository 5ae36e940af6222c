"""Issue 12: the stress pass stays inside the input contract, the constant-answer test, and the
record of which checks a verdict rests on (`Correctness.checks`)."""

from __future__ import annotations

import pytest
import torch

from feedback.result import Status
from feedback.worker.contract import Contract
from feedback.worker.inputs import stress


def _contract(draw, n: int = 3) -> Contract:
    contract = Contract()
    for _ in range(n):
        contract.observe(draw())
    return contract


def _spd() -> torch.Tensor:
    b = torch.randn(16, 16)
    return b @ b.T + 16 * torch.eye(16)


@pytest.mark.parametrize(("name", "draw", "kept", "broken"), [
    ("dense", lambda: [torch.randn(8, 8)], {"x*1e-2", "x*16", "x+5"}, {}),
    ("lower triangular", lambda: [torch.randn(8, 8).tril(), torch.randn(8, 8).tril()],
     {"x*1e-2", "x*16"}, {"x+5": "exact-zero pattern"}),
    ("symmetric positive definite", lambda: [_spd()], {"x*1e-2", "x*16", "x+5"}, {}),
    ("probabilities", lambda: [torch.softmax(torch.randn(4, 32), -1)], set(),
     {"x*1e-2": "sums", "x*16": "range", "x+5": "range"}),
    ("uniform [0, 1)", lambda: [torch.rand(64)], {"x*1e-2"}, {"x*16": "range", "x+5": "range"}),
    ("float labels", lambda: [torch.randint(0, 2, (64,)).float()], set(),
     {"x*1e-2": "integer values", "x*16": "range"}),
    ("positive", lambda: [torch.rand(64) + 0.5], {"x*1e-2", "x*16", "x+5"}, {}),
    ("fixed table", lambda: [torch.arange(16.0)], set(), {"x*16": "same tensor"}),
])
def test_transforms_are_kept_only_when_every_invariant_of_the_draws_survives(name, draw, kept, broken):
    contract = _contract(draw)
    for transform in ("x*1e-2", "x*16", "x+5"):
        found = contract.broken(stress(draw(), transform))
        if transform in kept:
            assert found == [], (name, transform, found)
        else:
            assert found, (name, transform)
            if transform in broken:
                assert any(broken[transform] in line for line in found), (name, transform, found)


def test_index_label_and_mask_tensors_are_never_transformed_and_do_not_block_the_rest():
    def draw():
        return [torch.randn(8, 5), torch.randint(0, 5, (8,)), torch.rand(8) > 0.5]
    contract = _contract(draw)
    transformed = stress(draw(), "x+5")
    assert transformed[1].dtype == torch.int64 and transformed[2].dtype == torch.bool
    assert contract.broken(transformed) == []


def test_invariants_are_described_and_shapes_that_vary_block_every_transform():
    lines = _contract(lambda: [torch.randn(6, 6).tril(), torch.softmax(torch.randn(3, 4), -1)]).describe()
    assert any("input 0: exactly 0 at the same 15 of 36 positions" == line for line in lines)
    assert "input 1: sums to 1 along dim 1" in lines and "input 1: values in [0, 1]" in lines
    sizes = iter([3, 4, 5, 6])
    varying = _contract(lambda: [torch.randn(next(sizes))])
    assert varying.broken([torch.randn(6) * 16])


TRIL_MATMUL = """
import torch, torch.nn as nn
N = 48
class Model(nn.Module):
    def forward(self, a, b):
        return torch.tril(torch.matmul(a, b))
def get_inputs():
    return [torch.tril(torch.randn(N, N)), torch.tril(torch.randn(N, N))]
def get_init_inputs():
    return []
"""

# skips the zero triangle, as an expert would: C[i, j] sums only over j <= k <= i
TRIL_SKIPPING = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        n = a.shape[0]
        c = torch.zeros(n, n)
        for i in range(n):
            c[i, : i + 1] = a[i, : i + 1] @ b[: i + 1, : i + 1]
        return c
"""


def test_a_kernel_that_skips_the_zero_triangle_is_correct_and_x_plus_5_is_skipped(kit):
    report = kit.run("correct", TRIL_MATMUL, TRIL_SKIPPING)
    assert report.status == Status.ok, report.message
    checks = report.correctness.checks
    stress_by_name = {s.transform: s for s in checks.stress}
    assert stress_by_name["x*16"].applied and stress_by_name["x*1e-2"].applied
    assert not stress_by_name["x+5"].applied
    assert "exact-zero pattern" in stress_by_name["x+5"].reason
    assert checks.draws >= 3 and any("exactly 0 at the same 1128" in i for i in checks.invariants)
    assert any("stress pass x+5 skipped" in w for w in report.warnings)


def test_a_kernel_that_ignores_the_triangle_in_its_inputs_is_still_caught(kit):
    # wrong inside the contract: upper triangle of the product kept
    report = kit.run("correct", TRIL_MATMUL, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return torch.triu(a @ b)
    """)
    assert report.status == Status.mismatch


PROBABILITIES = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, p):
        return p / p.sum(-1, keepdim=True) * 3.0
def get_inputs():
    return [torch.softmax(torch.randn(16, 64), -1)]
def get_init_inputs():
    return []
"""


def test_a_kernel_trusting_that_rows_sum_to_one_is_not_rejected(kit):
    report = kit.run("correct", PROBABILITIES, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, p):
                return p * 3.0     # the rows already sum to 1 in every draw
    """)
    assert report.status == Status.ok, report.message
    assert not any(s.applied for s in report.correctness.checks.stress)


def test_a_dense_problem_keeps_its_whole_stress_pass_and_records_the_checks(kit):
    from workerkit import LINEAR
    report = kit.run("correct", LINEAR, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.fc = nn.Linear(n_in, n_out)
            def forward(self, x):
                return torch.relu(self.fc(x))
    """)
    assert report.status == Status.ok, report.message
    checks = report.correctness.checks
    assert [s.transform for s in checks.stress if s.applied] == ["x*1e-2", "x*16", "x+5"]
    assert checks.weights == "by state_dict key, same shapes"
    assert checks.degenerate.trials == 3 + 3 and checks.degenerate.passing == []
    assert report.correctness.trials == 3 + 3


CONV3D_GN_MEAN = """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)
    def forward(self, x):
        return self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])
def get_inputs():
    return [torch.randn(4, 3, 6, 6, 6)]
def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("candidate", ["zeros", "honest"])
def test_a_degenerate_problem_gives_no_ok_to_zeros_or_to_an_honest_kernel(kit, candidate):
    body = ("return torch.zeros(x.shape[0])" if candidate == "zeros"
            else "return self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])")
    report = kit.run("correct", CONV3D_GN_MEAN, f"""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv3d(3, 8, 3)
                self.norm = nn.GroupNorm(4, 8)
            def forward(self, x):
                {body}
    """)
    assert report.status == Status.runtime_error
    assert report.message.startswith("degenerate problem") and "all zeros" in report.message
    assert "not the candidate's fault" in report.message
    assert "all zeros" in report.correctness.checks.degenerate.passing


def test_a_scalar_loss_that_depends_on_the_input_is_not_degenerate(kit):
    report = kit.run("correct", """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, a, b):
                return torch.mean((a - b) ** 2)
        def get_inputs():
            return [torch.randn(4096, 64), torch.randn(4096, 64)]
        def get_init_inputs():
            return []
    """, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return ((a - b) ** 2).sum() / a.numel()
    """)
    assert report.status == Status.ok, report.message
    assert report.correctness.checks.degenerate.passing == []


SOFTMAX_WIDE = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.randn(2, 262144)]
def get_init_inputs():
    return []
"""


def test_the_fp64_relative_floor_still_rejects_zeros_for_a_very_wide_softmax(kit):
    report = kit.run("correct", SOFTMAX_WIDE, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.zeros_like(x)
    """)
    assert report.status == Status.mismatch
    honest_source = """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                e = torch.exp(x - x.max(dim=1, keepdim=True).values)
                return e / e.sum(dim=1, keepdim=True)
    """
    honest = kit.run("correct", SOFTMAX_WIDE, honest_source)
    assert honest.status == Status.ok, honest.message
    # under the paper's absolute 1e-2 zeros pass every regular trial, but not the stress trial
    # x*16 (much larger maxima), so the problem is not degenerate and zeros are still refused
    loose = kit.run("correct", SOFTMAX_WIDE, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.zeros_like(x)
    """, tolerance="kernelbench-v0")
    assert loose.status == Status.mismatch and "numeric stress pass" in loose.message


def test_an_output_that_ignores_the_input_values_is_degenerate(kit):
    report = kit.run("correct", """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8, 8))
            def forward(self, x):
                return self.w.expand(x.shape[0], 8, 8).sum(0) * 1.0
        def get_inputs():
            return [torch.randn(4, 3)]
        def get_init_inputs():
            return []
    """, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(8, 8))
            def forward(self, x):
                return self.w * x.shape[0]
    """)
    assert report.status == Status.runtime_error and "degenerate problem" in report.message
    assert "the reference's output for another input set" in report.correctness.checks.degenerate.passing
