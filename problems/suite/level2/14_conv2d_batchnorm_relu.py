"""2-D convolution, batch normalization with batch statistics (random affine), ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
IN_CHANNELS = 32
OUT_CHANNELS = 64
KERNEL = 3
HEIGHT = 256
WIDTH = 256

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 3, "OUT_CHANNELS": 8, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("fusion", "conv", "norm", "activation")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(out_channels))
        self.bias = nn.Parameter(0.5 * torch.randn(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = F.batch_norm(self.conv(x), None, None, self.weight, self.bias, training=True)
        return torch.relu(z)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
