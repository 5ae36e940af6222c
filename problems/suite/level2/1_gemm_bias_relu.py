"""GEMM, extra bias, ReLU: y = relu(x @ W.T + b_linear + bias). Three ops in eager PyTorch."""

import torch
import torch.nn as nn

BATCH = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096

SIZES = {"small": {"BATCH": 32, "IN_FEATURES": 64, "OUT_FEATURES": 48}}
TAGS = ("fusion", "gemm", "activation")


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(0.1 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
