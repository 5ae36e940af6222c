"""Inclusive prefix sum along the rows: y = x.cumsum(1)."""

import torch
import torch.nn as nn

BATCH = 16384
LENGTH = 32768

SIZES = {"small": {"BATCH": 16, "LENGTH": 256}}
TAGS = ("scan", "cumsum")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, LENGTH)]


def get_init_inputs():
    return []
