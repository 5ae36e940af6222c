"""Log-softmax over the last dimension of a (batch, dim) tensor."""

import torch
import torch.nn as nn

BATCH = 32768
DIM = 16384

SIZES = {"small": {"BATCH": 16, "DIM": 256}}
TAGS = ("reduction", "softmax")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2]


def get_init_inputs():
    return []
