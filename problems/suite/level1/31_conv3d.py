"""3-D convolution, 3x3x3 kernel, no padding, on a volume batch."""

import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 16
OUT_CHANNELS = 32
KERNEL = 3
DEPTH = 64
HEIGHT = 128
WIDTH = 128

SIZES = {"small": {"BATCH": 1, "IN_CHANNELS": 2, "OUT_CHANNELS": 4, "DEPTH": 8, "HEIGHT": 8,
                   "WIDTH": 8}}
TAGS = ("conv",)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
