"""3-D average pooling: window 3, stride 2, padding 1."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 32
DEPTH = 64
HEIGHT = 128
WIDTH = 128

SIZES = {"small": {"BATCH": 1, "CHANNELS": 4, "DEPTH": 8, "HEIGHT": 8, "WIDTH": 8}}
TAGS = ("pooling",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, DEPTH, HEIGHT, WIDTH) * 3]


def get_init_inputs():
    return []
