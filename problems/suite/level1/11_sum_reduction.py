"""Sum over the middle dimension of a 3-D tensor, keeping the dimension: y = x.sum(1, keepdim=True)."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 4096
DIM2 = 2048
REDUCE_DIM = 1

SIZES = {"small": {"BATCH": 4, "DIM1": 64, "DIM2": 48}}
TAGS = ("reduction",)


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [REDUCE_DIM]
