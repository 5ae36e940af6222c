"""Per-sample cross-entropy of class logits against integer targets (reduction="none").

Per-sample losses rather than their mean: a single averaged scalar barely varies between input
draws, so a kernel returning a constant could pass.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 65536
CLASSES = 8192

SIZES = {"small": {"BATCH": 32, "CLASSES": 64}}
TAGS = ("loss", "reduction", "softmax")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets, reduction="none")


def get_inputs():
    return [torch.randn(BATCH, CLASSES) * 2, torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
