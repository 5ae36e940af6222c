"""2-D convolution, instance normalization (per sample and channel, no affine), divide by 2."""

import torch
import torch.nn as nn

BATCH = 32
IN_CHANNELS = 32
OUT_CHANNELS = 64
KERNEL = 3
HEIGHT = 256
WIDTH = 256
DIVISOR = 2.0

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 3, "OUT_CHANNELS": 8, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("fusion", "conv", "norm")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, divisor: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel)
        self.norm = nn.InstanceNorm2d(out_channels)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x)) / self.divisor


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL, DIVISOR]
