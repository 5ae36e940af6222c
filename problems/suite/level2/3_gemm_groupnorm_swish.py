"""GEMM, group normalization of the features, Swish, then a learned per-feature scale."""

import torch
import torch.nn as nn

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096
GROUPS = 32

SIZES = {"small": {"BATCH": 32, "IN_FEATURES": 64, "OUT_FEATURES": 48, "GROUPS": 4}}
TAGS = ("fusion", "gemm", "norm", "activation")


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(groups, out_features)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm(self.linear(x))
        return z * torch.sigmoid(z) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, GROUPS]
