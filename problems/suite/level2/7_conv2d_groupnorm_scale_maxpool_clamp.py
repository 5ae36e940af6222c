"""2-D convolution, group normalization, per-channel scale, 2x2 max pooling, clamp to [-2, 2]."""

import torch
import torch.nn as nn

BATCH = 32
IN_CHANNELS = 32
OUT_CHANNELS = 64
KERNEL = 3
GROUPS = 8
HEIGHT = 256
WIDTH = 256

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 3, "OUT_CHANNELS": 8, "GROUPS": 4, "HEIGHT": 16,
                   "WIDTH": 16}}
TAGS = ("fusion", "conv", "norm", "pooling")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)
        self.norm = nn.GroupNorm(groups, out_channels)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)
        self.scale = nn.Parameter(torch.randn(out_channels, 1, 1))
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.pool(self.norm(self.conv(x)) * self.scale)
        return torch.clamp(z, min=-2.0, max=2.0)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL, GROUPS]
