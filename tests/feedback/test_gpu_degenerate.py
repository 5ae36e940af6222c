"""A degenerate problem on a real GPU (opt-in: `pytest -m gpu`): issue 12, item 4. A file of its
own, so a parallel run (`make gpu-check`) does not queue it behind test_gpu.py's batches."""

from __future__ import annotations

import pytest
from candidates import cuda_candidate

from feedback.evaluate import evaluate
from feedback.result import Status
from problems.record import Problem

pytestmark = pytest.mark.gpu


# Issue 12, item 4: the reference's output is ~0 for every input (each GroupNorm group has zero
# mean), so a kernel that writes zeros passed correctness; now the problem is named degenerate.
CONV3D_GN_MEAN = Problem(id="level2/901_conv3d_groupnorm_mean", level=2, number=901,
                         name="conv3d_groupnorm_mean", origin="conv3d_groupnorm_mean.py", source="""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x):
        return self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])

def get_inputs():
    return [torch.randn(4, 3, 8, 8, 8)]

def get_init_inputs():
    return []
""")

ZEROS_KERNEL = cuda_candidate("relu", extra='''

class ModelNew(nn.Module):  # the published trick: same parameters, output all zeros
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x):
        return torch.zeros(x.shape[0], device=x.device) * ops.relu(x).flatten()[0]
''')


def test_an_all_zeros_kernel_on_a_degenerate_problem_is_not_ok(gpu_options):
    options = gpu_options.model_copy(update={"library_ops": "allow", "time": False,
                                             "size": None})  # the problem has one size
    r = evaluate(CONV3D_GN_MEAN, ZEROS_KERNEL, "cuda", options)
    assert r.status == Status.runtime_error, (r.status, r.message[:500])
    assert r.message.startswith("degenerate problem") and "not the candidate's fault" in r.message
    assert "all zeros" in r.correctness.checks.degenerate.passing

GPU_FIXTURES = [(CONV3D_GN_MEAN, ZEROS_KERNEL, "cuda")]  # built first by `make gpu-check`
