"""Rectangular matrix multiplication: C (M x N) = A (M x K) @ B (K x N)."""

import torch
import torch.nn as nn

M = 8192
K = 2048
N = 4096

SIZES = {"small": {"M": 96, "K": 32, "N": 48}}
TAGS = ("gemm",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
