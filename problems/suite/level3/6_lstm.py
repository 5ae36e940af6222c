"""Two-layer LSTM over a sequence, followed by a linear head on the last time step."""

import torch
import torch.nn as nn

BATCH = 64
SEQ = 512
INPUT_SIZE = 128
HIDDEN = 256
LAYERS = 2
OUT_FEATURES = 10

SIZES = {"small": {"BATCH": 2, "SEQ": 8, "INPUT_SIZE": 8, "HIDDEN": 16}}
TAGS = ("architecture", "recurrent", "gemm")


class Model(nn.Module):
    def __init__(self, input_size: int, hidden: int, layers: int, out_features: int):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out[:, -1, :])


def get_inputs():
    return [torch.randn(BATCH, SEQ, INPUT_SIZE)]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN, LAYERS, OUT_FEATURES]
