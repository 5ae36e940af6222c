"""Group normalization of an image batch (channels split into groups), random affine parameters."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 128
GROUPS = 16
HEIGHT = 256
WIDTH = 256

SIZES = {"small": {"BATCH": 2, "CHANNELS": 16, "GROUPS": 4, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("norm",)


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2 + 0.5]


def get_init_inputs():
    return [GROUPS, CHANNELS]
