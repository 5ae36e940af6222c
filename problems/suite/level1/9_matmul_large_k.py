"""Matrix multiplication with a large inner dimension: C (M x N) = A (M x K) @ B (K x N), K >> M, N.

Few output tiles, long reductions: a split-K kernel is the natural answer.
"""

import torch
import torch.nn as nn

M = 256
K = 524288
N = 256

SIZES = {"small": {"M": 16, "K": 2048, "N": 24}}
TAGS = ("gemm", "irregular")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
