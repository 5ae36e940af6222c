"""MobileNetV2 inverted residual block: 1x1 expansion, BN, ReLU6, 3x3 depthwise, BN, ReLU6,
1x1 projection, BN, residual add. BatchNorm layers are in training mode (batch statistics)."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 32
EXPANSION = 6
HEIGHT = 112
WIDTH = 112

SIZES = {"small": {"BATCH": 2, "CHANNELS": 4, "HEIGHT": 10, "WIDTH": 10}}
TAGS = ("architecture", "conv", "depthwise", "norm")


class Model(nn.Module):
    def __init__(self, channels: int, expansion: int):
        super().__init__()
        hidden = channels * expansion
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
        )
        # Random affine parameters, so no BatchNorm is an identity in eval mode either.
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                nn.init.normal_(module.weight, mean=1.0, std=0.3)
                nn.init.normal_(module.bias, mean=0.0, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, EXPANSION]
