"""GEMM (no bias), divide by 2, sum over the features, scale: one value per row.

The sum over the GEMM's outputs can be taken before the GEMM (x @ W.sum(0)), turning it into a
matrix-vector product: an honest algebraic win for a kernel that sees it.
"""

import torch
import torch.nn as nn

BATCH = 8192
IN_FEATURES = 4096
OUT_FEATURES = 4096
SCALE = 1.5

SIZES = {"small": {"BATCH": 32, "IN_FEATURES": 64, "OUT_FEATURES": 48}}
TAGS = ("fusion", "gemm", "reduction")


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features**0.5)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.matmul(x, self.weight.T) / 2
        return torch.sum(z, dim=1, keepdim=True) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
