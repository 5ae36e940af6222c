"""GRU cell unrolled over a sequence in Python, returning every hidden state.

One small GEMM pair and a handful of elementwise kernels per step: launch overhead dominates the
eager reference, so a persistent or fused kernel has a lot to gain.
"""

import torch
import torch.nn as nn

BATCH = 256
SEQ = 128
INPUT_SIZE = 512
HIDDEN = 1024

SIZES = {"small": {"BATCH": 2, "SEQ": 6, "INPUT_SIZE": 8, "HIDDEN": 16}}
TAGS = ("architecture", "recurrent", "gemm")


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden)
        self.hidden = hidden

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        h = h0
        states = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t, :], h)
            states.append(h)
        return torch.stack(states, dim=1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, INPUT_SIZE), torch.randn(BATCH, HIDDEN)]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN]
