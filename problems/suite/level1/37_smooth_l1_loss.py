"""Per-sample smooth L1 (Huber, beta = 1) loss: the elementwise loss averaged over features.

Each sample's predictions get their own scale, so the per-sample losses spread widely.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
FEATURES = 32768

SIZES = {"small": {"BATCH": 32, "FEATURES": 256}}
TAGS = ("loss", "reduction", "elementwise")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.smooth_l1_loss(predictions, targets, reduction="none").mean(dim=1)


def get_inputs():
    predictions = torch.randn(BATCH, FEATURES) * torch.randn(BATCH, 1) * 2
    return [predictions, torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return []
