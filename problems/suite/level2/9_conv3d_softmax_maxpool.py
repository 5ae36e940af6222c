"""3-D convolution, softmax over the channels, then 2x2x2 max pooling."""

import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 8
OUT_CHANNELS = 16
KERNEL = 3
DEPTH = 32
HEIGHT = 128
WIDTH = 128

SIZES = {"small": {"BATCH": 1, "IN_CHANNELS": 2, "OUT_CHANNELS": 4, "DEPTH": 6, "HEIGHT": 10,
                   "WIDTH": 10}}
TAGS = ("fusion", "conv", "softmax", "pooling")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel, padding=kernel // 2)
        self.pool = nn.MaxPool3d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.softmax(self.conv(x), dim=1))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, DEPTH, HEIGHT, WIDTH) * 2]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
