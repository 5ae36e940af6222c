"""The eager time job's FLOP count (feedback/worker/cost.py): torch's counter, without the
`torch._dynamo` import its first use would cost inside the job's hold of the device."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch


def test_flops_are_torch_counters_and_counting_imports_no_dynamo():
    script = textwrap.dedent("""
        import sys, torch
        from feedback.worker.cost import count_flops
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten(),
                                    torch.nn.Linear(8 * 14 * 14, 10))
        flops = count_flops(model, (torch.randn(2, 3, 16, 16),))
        print(flops, "torch._dynamo" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    conv = 2 * 2 * 8 * 14 * 14 * 3 * 3 * 3  # 2 x batch x out channels x positions x kernel
    linear = 2 * 2 * (8 * 14 * 14) * 10
    assert float(out[0]) == conv + linear
    assert out[1] == "False"


def test_a_program_the_counter_cannot_follow_counts_none_not_zero():
    from feedback.worker.cost import count_flops

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("no")

    assert count_flops(Broken(), (torch.ones(1),)) is None
