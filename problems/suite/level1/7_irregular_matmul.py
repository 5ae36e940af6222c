"""Matrix multiplication with irregular (non power-of-two, odd) sizes, so tiles never divide evenly."""

import torch
import torch.nn as nn

M = 4099
K = 2053
N = 6151

SIZES = {"small": {"M": 37, "K": 19, "N": 53}}
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
