"""Square matrix multiplication: C = A @ B, both N x N."""

import torch
import torch.nn as nn

N = 4096

SIZES = {"small": {"N": 64}}
TAGS = ("gemm",)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
