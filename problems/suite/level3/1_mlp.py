"""Multi-layer perceptron: three Linear + ReLU layers and a linear output layer."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 4096
HIDDEN = (8192, 4096, 2048)
OUT_FEATURES = 1024

SIZES = {"small": {"BATCH": 16, "IN_FEATURES": 64, "HIDDEN": (96, 64, 48), "OUT_FEATURES": 10}}
TAGS = ("architecture", "gemm", "activation")


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: tuple, out_features: int):
        super().__init__()
        layers = []
        for width in hidden:
            layers += [nn.Linear(in_features, width), nn.ReLU()]
            in_features = width
        layers.append(nn.Linear(in_features, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES) * 2]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, OUT_FEATURES]
