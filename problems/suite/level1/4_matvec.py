"""Matrix-vector product: y (M x 1) = A (M x K) @ x (K x 1). Memory-bound: A is read once."""

import torch
import torch.nn as nn

M = 32768
K = 32768

SIZES = {"small": {"M": 64, "K": 256}}
TAGS = ("gemm", "gemv")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
