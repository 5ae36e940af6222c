"""2-D max pooling: window 3, stride 2, padding 1."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 64
HEIGHT = 512
WIDTH = 512

SIZES = {"small": {"BATCH": 2, "CHANNELS": 4, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("pooling",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
