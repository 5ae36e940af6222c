"""`python -m problems list`: once as a user runs it (a subprocess), the rest in-process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from problems.__main__ import main

ROOT = Path(__file__).parents[2]


def list_problems(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "problems", "list", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_suite_listing_shows_every_problem_over_three_levels():
    result = list_problems("suite:")
    assert result.returncode == 0, result.stderr
    ids = re.findall(r"\b(level(\d)/\d+_\w+)", result.stdout)
    assert len({i for i, _ in ids}) >= 45
    assert {level for _, level in ids} == {"1", "2", "3"}
    assert "f32[4096, 4096]; f32[4096, 4096]" in result.stdout  # default size shapes
    assert re.search(r"\d+ problems \(level1: \d+, level2: \d+, level3: \d+\); 0 errors",
                     result.stdout)


def test_small_size_and_tags(capsys: pytest.CaptureFixture):
    assert main(["list", "suite:level1/19", "--size", "small"]) == 0
    out = capsys.readouterr().out
    assert "level1/19_relu" in out and "f32[16, 1024]" in out
    assert "elementwise, activation" in out


def test_errors_follow_the_table_and_set_the_exit_code(kernelbench_root: Path,
                                                      capsys: pytest.CaptureFixture):
    assert main(["list", str(kernelbench_root), "--size", "small"]) == 0  # some problems loaded
    out = capsys.readouterr().out
    assert out.index("error: ") > out.index("problems (")
    assert "19_ReLU" in out and "f32[16, 128] (default)" in out
    assert "7_Broken_syntax.py:" in out and "14_Imports_missing_module.py" in out

    broken = kernelbench_root / "KernelBench" / "level1" / "7_Broken_syntax.py"
    assert main(["list", str(broken)]) == 1
    assert "syntax error" in capsys.readouterr().out

    assert main(["list", "no/such/place"]) == 2
    assert "accepted forms" in capsys.readouterr().out
