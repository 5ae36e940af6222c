"""Scaled dot-product attention (no mask) on (batch, heads, sequence, head_dim) tensors.

Queries are scaled by 3 so attention is peaked rather than a near-uniform average (which would
make every output close to zero).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
HEADS = 16
SEQ = 1024
HEAD_DIM = 64

SIZES = {"small": {"BATCH": 1, "HEADS": 2, "SEQ": 32, "HEAD_DIM": 16}}
TAGS = ("attention",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    shape = (BATCH, HEADS, SEQ, HEAD_DIM)
    return [torch.randn(shape) * 3, torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
