"""ResNet basic block with a strided downsampling shortcut: conv3x3-BN-ReLU-conv3x3-BN, plus a
1x1 conv-BN shortcut, then ReLU. BatchNorm layers are in training mode (batch statistics)."""

import torch
import torch.nn as nn

BATCH = 64
IN_CHANNELS = 64
OUT_CHANNELS = 128
STRIDE = 2
HEIGHT = 112
WIDTH = 112

SIZES = {"small": {"BATCH": 2, "IN_CHANNELS": 4, "OUT_CHANNELS": 8, "HEIGHT": 12, "WIDTH": 12}}
TAGS = ("architecture", "conv", "norm", "activation")


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        # Random affine parameters, so no BatchNorm is an identity in eval mode either.
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                nn.init.normal_(module.weight, mean=1.0, std=0.3)
                nn.init.normal_(module.bias, mean=0.0, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, STRIDE]
