"""Shared set-up for the problems tests: one CPU thread (CI has two cores), fixture paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
torch.set_num_threads(1)

KERNELBENCH_FIXTURE = Path(__file__).parents[1] / "fixtures" / "kernelbench"
"""A KernelBench checkout in miniature: KernelBench/level1..3, good and broken files."""


@pytest.fixture
def kernelbench_root() -> Path:
    return KERNELBENCH_FIXTURE


def _write_problem(path: Path, body: str = "return torch.relu(x)", *, header: str = "",
                   inputs: str = "[torch.randn(4, 4)]") -> Path:
    """Write a minimal KernelBench-format program: `header` goes above `class Model`, `body` is
    the one line of `forward(self, x)`, `inputs` what `get_inputs()` returns."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "import torch\nimport torch.nn as nn\n"
        f"{header}\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        f"        {body}\n\n"
        f"def get_inputs():\n    return {inputs}\n\n"
        "def get_init_inputs():\n    return []\n")
    return path


@pytest.fixture
def write_problem():
    """The `_write_problem` function, for tests that build their own problem files."""
    return _write_problem
