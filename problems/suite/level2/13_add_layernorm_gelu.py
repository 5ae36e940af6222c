"""Residual add, layer normalization (random affine), GELU: y = gelu(layer_norm(x + residual))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 16384
DIM = 8192

SIZES = {"small": {"TOKENS": 32, "DIM": 128}}
TAGS = ("fusion", "norm", "activation", "elementwise")


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x + residual))


def get_inputs():
    return [torch.randn(TOKENS, DIM), torch.randn(TOKENS, DIM) * 2]


def get_init_inputs():
    return [DIM]
