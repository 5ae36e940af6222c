"""Transposed 2-D convolution (upsampling by 2), add a second input, HardSwish, multiply by it again.

y = hardswish(convT(x) + r) * r, where r is a residual tensor of the output's shape.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 32
HEIGHT = 128
WIDTH = 128

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 4, "OUT_CHANNELS": 6, "HEIGHT": 8, "WIDTH": 8}}
TAGS = ("fusion", "conv", "transposed", "activation")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, 4, stride=2, padding=1)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.conv(x) + residual) * residual


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH),
            torch.randn(BATCH, OUT_CHANNELS, 2 * HEIGHT, 2 * WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
