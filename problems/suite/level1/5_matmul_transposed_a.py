"""Matrix multiplication with a transposed left operand: C = A.T @ B, A stored K x M."""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096

SIZES = {"small": {"M": 48, "K": 64, "N": 40}}
TAGS = ("gemm", "transposed")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []
