"""Depthwise 2-D convolution (one 3x3 filter per channel, groups = channels), padding 1."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 128
KERNEL = 3
HEIGHT = 256
WIDTH = 256

SIZES = {"small": {"BATCH": 2, "CHANNELS": 8, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("conv", "depthwise")


class Model(nn.Module):
    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, KERNEL]
