"""Causal multi-head self-attention (GPT style): fused QKV projection, masked softmax attention
written out in PyTorch, output projection."""

import math

import torch
import torch.nn as nn

BATCH = 16
SEQ = 1024
DIM = 768
HEADS = 12

SIZES = {"small": {"BATCH": 2, "SEQ": 16, "DIM": 32, "HEADS": 4}}
TAGS = ("architecture", "attention", "gemm")


class Model(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM) * 2]


def get_init_inputs():
    return [DIM, HEADS]
