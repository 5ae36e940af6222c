"""Matrix multiplication with a small inner dimension: C (M x N) = A (M x K) @ B (K x N), K << M, N.

Writing C dominates; the arithmetic per output element is short.
"""

import torch
import torch.nn as nn

M = 16384
K = 128
N = 16384

SIZES = {"small": {"M": 128, "K": 8, "N": 96}}
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
