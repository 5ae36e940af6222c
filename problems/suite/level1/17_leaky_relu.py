"""Leaky ReLU with slope 0.01 for negative inputs, elementwise."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
DIM = 32768

SIZES = {"small": {"BATCH": 16, "DIM": 1024}}
TAGS = ("elementwise", "activation")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=0.01)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4]


def get_init_inputs():
    return []
