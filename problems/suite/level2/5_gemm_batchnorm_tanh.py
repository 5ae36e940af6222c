"""GEMM, batch normalization over the batch (batch statistics, random affine), then tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096

SIZES = {"small": {"BATCH": 32, "IN_FEATURES": 64, "OUT_FEATURES": 48}}
TAGS = ("fusion", "gemm", "norm", "activation")


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(out_features))
        self.bias = nn.Parameter(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.batch_norm(self.linear(x), None, None, self.weight, self.bias, training=True)
        return torch.tanh(z)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
