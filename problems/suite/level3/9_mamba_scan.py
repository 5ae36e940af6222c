"""Mamba-like selective state-space scan, written as a Python loop over time.

Input-dependent step sizes dt = softplus(x W_dt), input and output projections B_t, C_t; per
channel d and state n: h = exp(dt * A) * h + dt * B_t * x_t, y_t = sum_n C_t * h + D * x_t.
The loop launches several kernels per step; a parallel (chunked) scan kernel is the natural win.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
SEQ = 128
DIM = 1024
STATE = 16

SIZES = {"small": {"BATCH": 2, "SEQ": 8, "DIM": 16, "STATE": 4}}
TAGS = ("architecture", "scan", "recurrent")


class Model(nn.Module):
    def __init__(self, dim: int, state: int):
        super().__init__()
        self.dt_proj = nn.Linear(dim, dim)
        self.b_proj = nn.Linear(dim, state, bias=False)
        self.c_proj = nn.Linear(dim, state, bias=False)
        # A is negative, so the recurrence decays; log-parameterised as in Mamba.
        self.A_log = nn.Parameter(torch.log(torch.arange(1, state + 1).float()).repeat(dim, 1)
                                  + 0.1 * torch.randn(dim, state))
        self.D = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        A = -torch.exp(self.A_log)                           # (dim, state)
        dt = F.softplus(self.dt_proj(x))                     # (batch, seq, dim)
        B = self.b_proj(x)                                   # (batch, seq, state)
        C = self.c_proj(x)                                   # (batch, seq, state)
        h = x.new_zeros(batch, dim, A.shape[1])
        ys = []
        for t in range(seq):
            dA = torch.exp(dt[:, t, :, None] * A)            # (batch, dim, state)
            dBx = dt[:, t, :, None] * B[:, t, None, :] * x[:, t, :, None]
            h = dA * h + dBx
            ys.append((h * C[:, t, None, :]).sum(-1))
        return torch.stack(ys, dim=1) + x * self.D


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, STATE]
