"""Hyperbolic tangent, elementwise."""

import torch
import torch.nn as nn

BATCH = 16384
DIM = 32768

SIZES = {"small": {"BATCH": 16, "DIM": 1024}}
TAGS = ("elementwise", "activation")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2]


def get_init_inputs():
    return []
