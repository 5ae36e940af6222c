"""RMS normalization, then a SwiGLU feed-forward: (silu(x W1) * (x W3)) W2.

Two GEMMs share their input and meet in an elementwise product before the third.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

TOKENS = 4096
DIM = 2048
HIDDEN = 5632
EPS = 1e-6

SIZES = {"small": {"TOKENS": 32, "DIM": 64, "HIDDEN": 96}}
TAGS = ("fusion", "gemm", "norm", "activation")


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + 0.5 * torch.randn(dim))
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm_weight
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


def get_inputs():
    return [torch.randn(TOKENS, DIM) * 3]


def get_init_inputs():
    return [DIM, HIDDEN, EPS]
