"""Batch normalization of an image batch with batch statistics (training-mode formula), random
affine parameters, and no running-statistics side effects."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
CHANNELS = 64
HEIGHT = 256
WIDTH = 256
EPS = 1e-5

SIZES = {"small": {"BATCH": 4, "CHANNELS": 8, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("norm",)


class Model(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, None, self.weight, self.bias, training=True, eps=self.eps)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2 + 0.5]


def get_init_inputs():
    return [CHANNELS, EPS]
