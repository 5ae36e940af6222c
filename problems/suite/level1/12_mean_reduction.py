"""Mean over the middle dimension of a 3-D tensor: y = x.mean(1).

Each (batch, column) gets its own offset, so the means are of order one and a kernel that
returns zeros cannot pass.
"""

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
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2) + torch.randn(BATCH, 1, DIM2)]


def get_init_inputs():
    return [REDUCE_DIM]
