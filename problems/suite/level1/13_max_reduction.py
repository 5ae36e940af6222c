"""Maximum over the last dimension: y = x.max(-1).values."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 2048
DIM2 = 4096
REDUCE_DIM = -1

SIZES = {"small": {"BATCH": 4, "DIM1": 48, "DIM2": 64}}
TAGS = ("reduction",)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim).values


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [REDUCE_DIM]
