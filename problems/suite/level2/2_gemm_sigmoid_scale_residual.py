"""GEMM, then sigmoid, scaling and a residual add of the GEMM output: y = z + s * sigmoid(z)."""

import torch
import torch.nn as nn

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096
SCALE = 2.0

SIZES = {"small": {"BATCH": 32, "IN_FEATURES": 64, "OUT_FEATURES": 48}}
TAGS = ("fusion", "gemm", "activation", "elementwise")


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.linear(x)
        return z + torch.sigmoid(z) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
