"""The `profile` job (rows, own share) and the `build` job (import errors, captured output)."""

from __future__ import annotations

from workerkit import MATMUL

from feedback.result import Status
from feedback.worker.ops import base_kernel_name
from feedback.worker.profiling import breakdown

CANDIDATE = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b) * 1.0
"""


def test_candidate_profile_has_rows_by_self_time(kit):
    report = kit.run("profile", MATMUL, CANDIDATE)
    assert report.status == Status.ok, report.message
    p = report.profile
    assert p.device == "cpu" and p.rows
    names = [r.name for r in p.rows]
    assert "aten::mm" in names
    assert [r.self_time_us for r in p.rows] == sorted((r.self_time_us for r in p.rows), reverse=True)
    assert all(0 <= r.share <= 1 and r.count >= 1 for r in p.rows)
    assert p.own_share == 0.0  # only library operators: nothing of its own


def test_reference_profile_marks_nothing_as_own(kit):
    report = kit.run("profile", MATMUL, None, role="eager")
    assert report.status == Status.ok, report.message
    assert report.profile.own_share is None and not any(r.own for r in report.profile.rows)


def test_own_kernels_are_recognised_by_name():
    assert base_kernel_name("void my_relu_kernel<float, 4>(float const*, float*, int)") == "my_relu_kernel"
    assert base_kernel_name("void at::native::vectorized_elementwise_kernel<4>(int)") == "vectorized_elementwise_kernel"
    assert base_kernel_name("fused_add_kernel") == "fused_add_kernel"

    class Event:
        def __init__(self, key, us):
            import torch

            self.key, self.count, self.self_device_time_total = key, 2, us
            self.self_cpu_time_total = 0
            self.device_type = torch.autograd.DeviceType.CUDA

    events = [Event("void my_kernel(float*)", 300.0), Event("ampere_sgemm_128x64_nn", 100.0)]
    profile = breakdown(events, True, own=lambda n: base_kernel_name(n) == "my_kernel", mark=True)
    assert profile.own_share == 0.75 and profile.rows[0].own and not profile.rows[1].own


def test_build_of_an_importable_candidate_is_ok_and_keeps_its_output(kit):
    report = kit.run("build", MATMUL, 'print("building my kernel")\n' + CANDIDATE)
    assert report.status == Status.ok, report.message
    assert any("building my kernel" in w for w in report.warnings)


def test_build_errors_are_compile_errors_with_the_traceback_and_output(kit):
    report = kit.run("build", MATMUL, """
        import sys
        print("nvcc: error: something the compiler said", file=sys.stderr)
        raise RuntimeError("Error building extension 'k': k.cu(3): error: identifier undefined")
    """)
    assert report.status == Status.compile_error
    assert "identifier undefined" in report.message and "Traceback" in report.message
    assert "something the compiler said" in report.message


def test_build_without_model_new_is_a_compile_error(kit):
    report = kit.run("build", MATMUL, "import torch\nclass Model2: pass\n")
    assert report.status == Status.compile_error and "ModelNew" in report.message
    syntax = kit.run("build", MATMUL, "class ModelNew(:\n")
    assert syntax.status == Status.compile_error and "SyntaxError" in syntax.message
