"""Transposed 2-D convolution (upsampling by 2): kernel 4, stride 2, padding 1."""

import torch
import torch.nn as nn

BATCH = 64
IN_CHANNELS = 64
OUT_CHANNELS = 32
KERNEL = 4
STRIDE = 2
HEIGHT = 128
WIDTH = 128

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 4, "OUT_CHANNELS": 6, "HEIGHT": 8, "WIDTH": 8}}
TAGS = ("conv", "transposed")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int):
        super().__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel, stride=stride, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL, STRIDE]
