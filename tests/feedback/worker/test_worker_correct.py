"""The `correct` job on the cpp backend with pure-Python candidates: verdicts and guards."""

from __future__ import annotations

from workerkit import GELU, LINEAR, MATMUL

from feedback.job import WorkerReport
from feedback.result import Status

HONEST_SPLIT_K = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        # K split into chunks, partial products summed in reverse order
        parts = [a[:, i:i + 128] @ b[i:i + 128] for i in range(0, a.shape[1], 128)]
        out = torch.zeros(a.shape[0], b.shape[1])
        for p in reversed(parts):
            out = out + p
        return out
"""


def test_honest_candidate_passes_every_trial_and_records_the_policy(kit):
    report = kit.run("correct", MATMUL, HONEST_SPLIT_K, correctness_trials=5)
    assert report.status == Status.ok, report.message
    c = report.correctness
    assert c.trials == 5 + 3 and c.trials_passed == c.trials  # 5 regular + 3 stress trials
    assert c.tolerance.policy == "fp64-relative" and c.tolerance.rtol == 16.0
    assert c.max_abs_err is not None and 0 <= c.max_abs_err < 0.1 and c.worst_index is not None  # x*16 stress
    assert len(c.worst_index) == 2
    if "dispatched" in WorkerReport.model_fields:  # the field this worker adds to feedback/job.py
        assert report.dispatched and report.dispatched["aten::mm"] == 8  # 1024/128 chunks, one call
    parts = ("prepare", "trials", "stress", "unseen_size", "ops")  # where the job's time went
    assert all(report.phases[k] >= 0 for k in parts), report.phases
    assert report.phases["trials"] > 0 and report.phases["stress"] > 0
    assert sum(report.phases[k] for k in parts) <= report.seconds
    inside = {k: v for k, v in report.phases.items() if k.startswith("prepare/")}  # prepare's parts
    assert {"prepare/reference", "prepare/twin", "prepare/trusted", "prepare/candidate"} <= set(inside)
    assert sum(inside.values()) <= report.phases["prepare"] + 0.01
    assert report.phases["other"] >= 0  # the parts are not counted twice


def test_wrong_values_are_a_mismatch_with_the_worst_element(kit):
    wrong = HONEST_SPLIT_K.replace("return out", "return out * 1.001")
    report = kit.run("correct", MATMUL, wrong)
    assert report.status == Status.mismatch
    c = report.correctness
    assert c.trials_passed == 0 and c.trials == 3
    assert "outside tolerance" in report.message and "passed 0 of 3" in report.message
    assert c.got_at_worst is not None and abs(c.got_at_worst - c.expected_at_worst) > 1e-3


def test_wrong_shape_is_a_shape_mismatch(kit):
    report = kit.run("correct", MATMUL, HONEST_SPLIT_K.replace("return out", "return out[:, :-1]"))
    assert report.status == Status.shape_mismatch
    assert "[32, 23]" in report.message and "[32, 24]" in report.message


def test_wrong_dtype_is_a_mismatch(kit):
    report = kit.run("correct", MATMUL, HONEST_SPLIT_K.replace("return out", "return out.double()"))
    assert report.status == Status.mismatch and "dtype" in report.message


def test_candidate_exception_is_a_runtime_error_with_its_traceback(kit):
    report = kit.run("correct", MATMUL, """
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return helper(a)
        def helper(a):
            raise ValueError("kernel launch failed: bad grid")
    """)
    assert report.status == Status.runtime_error
    assert "bad grid" in report.message and "helper" in report.message and "candidate_" in report.message


def test_sys_exit_inside_forward_is_named(kit):
    report = kit.run("correct", MATMUL, """
        import sys, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                sys.exit(0)
    """)
    assert report.status == Status.runtime_error and "sys.exit(0)" in report.message


def test_weights_are_copied_by_order_when_keys_differ(kit):
    report = kit.run("correct", LINEAR, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.w = nn.Parameter(torch.empty(n_out, n_in))
                self.b = nn.Parameter(torch.empty(n_out))
            def forward(self, x):
                return torch.clamp_min(x @ self.w.t() + self.b, 0.0)
    """)
    assert report.status == Status.ok, report.message


def test_weights_that_cannot_be_matched_are_a_clear_runtime_error_stating_the_rule(kit):
    report = kit.run("correct", LINEAR, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.w = nn.Parameter(torch.empty(n_in, n_out + 1))   # another element count
                self.b = nn.Parameter(torch.empty(n_out))
            def forward(self, x):
                return torch.relu(x @ self.w[:, :-1] + self.b)
    """)
    assert report.status == Status.runtime_error
    assert "cannot copy the reference's weights" in report.message and "[64, 33]" in report.message
    assert "same number of elements" in report.message and "reshaping" in report.message


def test_weights_with_equal_element_counts_are_copied_by_reshaping_and_recorded(kit):
    conv_bias = """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(3, c, 3)
                self.bias = nn.Parameter(torch.randn(c, 1, 1))
            def forward(self, x):
                return self.conv(x) + self.bias
        def get_inputs():
            return [torch.randn(2, 3, 10, 10)]
        def get_init_inputs():
            return [8]
    """
    report = kit.run("correct", conv_bias, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self, c):
                super().__init__()
                # the reference's order: its own bias first, then conv.weight, conv.bias
                self.bias = nn.Parameter(torch.empty(c))                # [C], not [C, 1, 1]
                self.weight = nn.Parameter(torch.empty(c, 3 * 3 * 3))   # flattened filters
                self.conv_bias = nn.Parameter(torch.empty(c))
            def forward(self, x):
                w = self.weight.view(-1, 3, 3, 3)
                return torch.nn.functional.conv2d(x, w, self.conv_bias) + self.bias[:, None, None]
    """)
    assert report.status == Status.ok, report.message
    rule = report.correctness.checks.weights
    assert rule.startswith("by registration order, reshaped")
    assert "[8, 3, 3, 3] -> [8, 27]" in rule and "[8, 1, 1] -> [8]" in rule


def test_a_transposed_weight_layout_is_a_mismatch_that_names_the_reshape(kit):
    report = kit.run("correct", LINEAR, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self, n_in, n_out):
                super().__init__()
                self.w = nn.Parameter(torch.empty(n_in, n_out))   # transposed layout
                self.b = nn.Parameter(torch.empty(n_out))
            def forward(self, x):
                return torch.relu(x @ self.w + self.b)
    """)
    assert report.status == Status.mismatch
    assert "copied by registration order, reshaped" in report.message
    assert "[32, 64] -> [64, 32]" in report.message and "transposed" in report.message


def test_integer_outputs_compare_exactly(kit):
    argmax = """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.argmax(x, dim=1)
        def get_inputs():
            return [torch.randn(32, 100)]
        def get_init_inputs():
            return []
    """
    ok = kit.run("correct", argmax, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.max(x, dim=1).indices
    """)
    assert ok.status == Status.ok, ok.message
    off = kit.run("correct", argmax, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                i = torch.max(x, dim=1).indices
                return torch.where(i == 0, i + 1, i)   # wrong only where the max sits at column 0
    """, correctness_trials=20)
    assert off.status == Status.mismatch and "integer elements differ" in off.message


def test_tuple_outputs_are_compared_element_by_element(kit):
    pair = """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return x.sum(1), x.amax(1)
        def get_inputs():
            return [torch.randn(8, 300)]
        def get_init_inputs():
            return []
    """
    ok = kit.run("correct", pair, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x[:, ::2].sum(1) + x[:, 1::2].sum(1), torch.max(x, 1).values
    """)
    assert ok.status == Status.ok, ok.message
    short = kit.run("correct", pair, """
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return (x.sum(1),)
    """)
    assert short.status == Status.shape_mismatch and "tuple of 2" in short.message


def test_tanh_gelu_for_exact_gelu_fails_the_default_policy(kit):
    report = kit.run("correct", GELU, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.nn.functional.gelu(x, approximate="tanh")
    """)
    assert report.status == Status.mismatch, report.message


def test_bf16_math_inside_an_fp32_problem_fails_the_default_policy(kit):
    report = kit.run("correct", MATMUL, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return (a.bfloat16() @ b.bfloat16()).float()
    """)
    assert report.status == Status.mismatch, report.message


def test_kernelbench_presets_record_their_tolerances(kit):
    tanh = """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.nn.functional.gelu(x, approximate="tanh")
    """
    strict = kit.run("correct", GELU, tanh, tolerance="kernelbench")
    assert strict.correctness.tolerance.policy == "kernelbench"
    assert strict.correctness.tolerance.atol == strict.correctness.tolerance.rtol == 1e-4
    assert strict.status == Status.mismatch
    lenient = kit.run("correct", GELU, tanh, tolerance="kernelbench-v0")
    assert lenient.status == Status.ok, lenient.message
    assert lenient.correctness.tolerance.atol == 1e-2


def test_stress_pass_catches_a_shortcut_that_only_holds_for_the_problems_inputs(kit):
    # inputs are already normalised rows, so "skip the normalisation" is exact on them
    layernorm = """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def forward(self, x):
                return torch.nn.functional.layer_norm(x, x.shape[-1:])
        def get_inputs():
            x = torch.randn(16, 256)
            return [torch.nn.functional.layer_norm(x, x.shape[-1:])]
        def get_init_inputs():
            return []
    """
    report = kit.run("correct", layernorm, """
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x.clone()
    """)
    assert report.status == Status.mismatch
    assert "numeric stress pass" in report.message
    assert report.correctness.trials_passed == 3


def test_a_reference_that_cannot_run_in_float64_falls_back_to_kernelbench_and_says_so(kit):
    fp32_only = """
        import torch, torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("w", torch.randn(64, 8))
            def forward(self, x):
                return x @ self.w.float()          # float64 x @ float32 w raises
        def get_inputs():
            return [torch.randn(16, 64)]
        def get_init_inputs():
            return []
    """
    report = kit.run("correct", fp32_only, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("w", torch.empty(64, 8))
            def forward(self, x):
                return torch.mm(x, self.w)
    """)
    assert report.status == Status.ok, report.message
    assert report.correctness.tolerance.policy == "kernelbench"
    assert any("float64 reference" in w for w in report.warnings)
