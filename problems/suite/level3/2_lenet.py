"""LeNet-5-like CNN on 32x32 single-channel images: two conv + ReLU + max-pool stages, three
fully connected layers."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
CLASSES = 10

SIZES = {"small": {"BATCH": 4}}
TAGS = ("architecture", "conv", "pooling", "gemm")


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(BATCH, 1, 32, 32) * 2]


def get_init_inputs():
    return [CLASSES]
