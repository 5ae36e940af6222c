"""Reverse (suffix) prefix sum along the rows: y[i] = sum of x[j] for j >= i.

The reference flips, scans and flips back: three passes where one would do.
"""

import torch
import torch.nn as nn

BATCH = 16384
LENGTH = 16384

SIZES = {"small": {"BATCH": 16, "LENGTH": 256}}
TAGS = ("scan", "cumsum")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x.flip(1), dim=1).flip(1)


def get_inputs():
    return [torch.randn(BATCH, LENGTH)]


def get_init_inputs():
    return []
