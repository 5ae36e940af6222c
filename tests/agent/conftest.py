"""Shared fixtures of the agent tests: fast runs through the scripted evaluator and replay."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).parent))

from scripted import ScriptedEvaluator, write_transcript

RELU = "level1/19_relu"
MATMUL = "level1/1_square_matmul"


@pytest.fixture
def scripted() -> ScriptedEvaluator:
    return ScriptedEvaluator()


@pytest.fixture
def transcript(tmp_path):
    """Write a replay transcript: transcript({(problem, index, turn): outcome}) -> model string."""
    def write(turns: dict, name: str = "t.jsonl") -> str:
        return f"replay:{write_transcript(tmp_path / name, turns)}"
    return write
