"""Per-sample cosine-similarity loss: 1 - cos(predictions[i], targets[i]).

Targets are a random multiple of the predictions plus noise, so similarities spread over
(-1, 1) instead of clustering at 0 as they would for independent vectors.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16384
FEATURES = 32768

SIZES = {"small": {"BATCH": 32, "FEATURES": 256}}
TAGS = ("loss", "reduction")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return 1 - F.cosine_similarity(predictions, targets, dim=1)


def get_inputs():
    predictions = torch.randn(BATCH, FEATURES)
    targets = predictions * torch.randn(BATCH, 1) + 0.5 * torch.randn(BATCH, FEATURES)
    return [predictions, targets]


def get_init_inputs():
    return []
