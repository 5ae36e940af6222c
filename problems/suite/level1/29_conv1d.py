"""1-D convolution: (batch, in_channels, length) -> (batch, out_channels, length - kernel + 1)."""

import torch
import torch.nn as nn

BATCH = 64
IN_CHANNELS = 64
OUT_CHANNELS = 128
KERNEL = 3
LENGTH = 16384

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 4, "OUT_CHANNELS": 8, "LENGTH": 64}}
TAGS = ("conv",)


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, LENGTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
