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


def test_json_listing_is_an_array_of_problems_with_inputs_and_sizes(capsys):
    import json

    assert main(["list", "suite:level1/19,suite:level2/1", "--json", "--size", "small"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in listed] == ["level1/19_relu", "level2/1_gemm_bias_relu"]
    relu = listed[0]
    assert (relu["level"], relu["name"], relu["size"]) == (1, "relu", "small")
    assert "elementwise" in relu["tags"] and relu["sizes"]["small"] == {"BATCH": 16, "DIM": 1024}
    assert relu["inputs"] == [{"dtype": "f32", "shape": [16, 1024]}]


def test_a_bad_subcommand_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["lst"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and "\n" not in err
    assert "invalid choice: 'lst'" in err and "'list'" in err
