"""RMS normalization over the channel dimension of an image batch, written out in PyTorch:
y = x / sqrt(mean(x^2 over channels) + eps) * weight."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 512
WIDTH = 512
EPS = 1e-5

SIZES = {"small": {"BATCH": 2, "CHANNELS": 8, "HEIGHT": 16, "WIDTH": 16}}
TAGS = ("norm",)


class Model(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=1, keepdim=True) + self.eps)
        return x / rms * self.weight.view(1, -1, 1, 1)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, EPS]
