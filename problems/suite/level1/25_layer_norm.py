"""Layer normalization over the last dimension, with learned (random, not identity) scale and shift."""

import torch
import torch.nn as nn

BATCH = 32768
FEATURES = 16384

SIZES = {"small": {"BATCH": 32, "FEATURES": 256}}
TAGS = ("norm",)


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        # Random affine parameters: with the default ones/zeros a kernel could skip the affine step.
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, FEATURES) * 2 + 1]


def get_init_inputs():
    return [FEATURES]
