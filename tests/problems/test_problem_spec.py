"""The one spec parser: suite forms, paths, parquet filters, lists, and its errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from problems import Problem, SpecError, matches, select


def ids(spec: str) -> list[str]:
    return [p.id for p in select(spec).problems]


def test_whole_suite_and_levels():
    everything = select("suite:")
    assert not everything.errors and len(everything.problems) >= 45
    level1 = ids("suite:level1")
    assert level1 and all(i.startswith("level1/") for i in level1)
    assert ids("level1") == level1  # bare level means the suite


@pytest.mark.parametrize("spec, expected", [
    ("suite:level2/1", ["level2/1_gemm_bias_relu"]),
    ("level1/19", ["level1/19_relu"]),
    ("suite:level1/relu", ["level1/19_relu"]),
    ("suite:level1/ReLU", ["level1/19_relu"]),
    ("suite:level1/19_relu", ["level1/19_relu"]),
    ("suite:level1/1,suite:level1/19,suite:level2/1",
     ["level1/1_square_matmul", "level1/19_relu", "level2/1_gemm_bias_relu"]),
    ("level1/19, level1/relu", ["level1/19_relu"]),  # union, each id once
])
def test_single_problems(spec: str, expected: list[str]):
    assert ids(spec) == expected


def test_globs():
    norms = ids("suite:level1/*norm*")
    assert "level1/25_layer_norm" in norms and all("norm" in i for i in norms)
    assert set(ids("suite:*norm*")) >= set(norms)  # no level: all levels
    assert {i.split("/")[0] for i in ids("suite:level*/1")} == {"level1", "level2", "level3"}


def test_matches_rules():
    problem = Problem(id="level2/12_Gemm_Relu", level=2, number=12, name="Gemm_Relu", source="",
                      origin="x.py")
    for pattern in ("", "level2", "level2/12", "level2/gemm_relu", "level2/12_gemm*", "*relu",
                    "level?/*"):
        assert matches(problem, pattern), pattern
    for pattern in ("level1", "level2/1", "level2/relu", "level3/*"):
        assert not matches(problem, pattern), pattern


@pytest.mark.parametrize("spec, message", [
    ("", "empty problem spec"),
    ("level1,", "empty problem spec"),
    ("nonsense", "no such file or folder, and not a suite spec; accepted forms: suite:"),
    ("suite:level1/999", "suite:level1/999: matched no problem"),
    ("suite:level9", "matched no problem"),
])
def test_spec_errors_are_one_line(spec: str, message: str):
    with pytest.raises(SpecError, match=message) as info:
        select(spec)
    assert "\n" not in str(info.value)


def test_paths_of_the_wrong_kind(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SpecError, match="not a .py file, a folder or a .parquet file"):
        select(str(tmp_path / "notes.txt"))
    with pytest.raises(SpecError, match="no level folders"):
        select(str(tmp_path))


def test_broken_py_file_is_a_selection_error_not_a_spec_error(tmp_path: Path):
    path = tmp_path / "level1" / "1_bad.py"
    path.parent.mkdir()
    path.write_text("def (:\n")
    selection = select(str(path))
    assert not selection.problems and selection.errors[0].startswith(f"{path}:1: syntax error")


def test_parquet_with_a_level_filter(tmp_path: Path):
    code = ("import torch\nclass Model(torch.nn.Module):\n    pass\n"
            "def get_inputs(): return []\ndef get_init_inputs(): return []\n")
    rows = [{"code": code, "level": level, "name": f"P{n}", "problem_id": n}
            for level in (1, 2) for n in (1, 2)]
    path = tmp_path / "kb.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert ids(str(path)) == ["level1/1_P1", "level1/2_P2", "level2/1_P1", "level2/2_P2"]
    assert ids(f"{path}#level2") == ["level2/1_P1", "level2/2_P2"]
    assert ids(f"{path}#level1/2,suite:level1/19") == ["level1/2_P2", "level1/19_relu"]
