"""Batched matrix multiplication: C[b] = A[b] @ B[b] for every b in the batch."""

import torch
import torch.nn as nn

BATCH = 128
M = 512
K = 1024
N = 512

SIZES = {"small": {"BATCH": 4, "M": 32, "K": 64, "N": 24}}
TAGS = ("gemm",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
