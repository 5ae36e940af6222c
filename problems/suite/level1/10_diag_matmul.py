"""Diagonal times dense: C = diag(a) @ B. The reference builds the N x N diagonal matrix first;
the same result is a row scaling of B."""

import torch
import torch.nn as nn

N = 4096
M = 4096

SIZES = {"small": {"N": 64, "M": 48}}
TAGS = ("gemm", "elementwise")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
