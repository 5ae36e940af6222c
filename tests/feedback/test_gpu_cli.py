"""`python -m feedback.evaluate ... --json --profile` on a real GPU (opt-in: `pytest -m gpu`): a
file of its own, so a parallel run (`make gpu-check`) starts it beside test_gpu.py's batches
rather than after them (H200, 2026-12-01: 70 s, most of it waiting for the device)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from candidates import cuda_candidate

from feedback.result import EvalResult, Status

pytestmark = pytest.mark.gpu


def test_cli_json_on_the_gpu(tmp_path, cache_dir):
    cand = tmp_path / "relu.py"
    cand.write_text(cuda_candidate("relu"))
    proc = subprocess.run([sys.executable, "-m", "feedback.evaluate", "suite:level1/19", str(cand),
                           "--backend", "cuda", "--size", "small", "--json", "--device", "cuda:0",
                           "--timing-trials", "20", "--profile", "--cache-dir", str(cache_dir)],
                          capture_output=True, text=True, timeout=900, check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = EvalResult.model_validate(json.loads(proc.stdout))
    assert r.status == Status.ok, r.message
    assert r.profile is not None and r.profile.device == "cuda"
