"""Loaders: single files, level folders, KernelBench checkouts, parquet rows, metadata by AST."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from problems import ProblemLoadError, load_file, load_folder, load_module, load_parquet
from problems.loaders import level_folders


def test_file_in_a_level_folder_gets_level_number_name_and_id(tmp_path: Path, write_problem):
    path = write_problem(tmp_path / "level2" / "17_Conv_ReLU.py")
    problem = load_file(path)
    assert (problem.id, problem.level, problem.number, problem.name) == (
        "level2/17_Conv_ReLU", 2, 17, "Conv_ReLU")
    assert problem.origin == str(path) and problem.origin_path == path
    assert problem.tags == () and problem.sizes == {}


def test_loose_file_without_level_or_number(tmp_path: Path, write_problem):
    problem = load_file(write_problem(tmp_path / "my_kernel.py"))
    assert (problem.id, problem.level, problem.number, problem.name) == (
        "my_kernel", 0, 0, "my_kernel")


def test_metadata_is_read_without_executing(tmp_path: Path, write_problem):
    header = ('raise SystemExit("never executed by the loader")\n'
              'N = 8\nSIZES = {"small": {"N": 2}}\nTAGS = ("Elementwise", "activation")\n')
    problem = load_file(write_problem(tmp_path / "level1" / "3_x.py", header=header,
                                      inputs="[torch.randn(N)]"))
    assert problem.tags == ("elementwise", "activation")
    assert problem.sizes == {"small": {"N": 2}}


@pytest.mark.parametrize("header, message", [
    ("SIZES = {'small': {'N': 2 * 2}}\n", r"SIZES must be a literal"),
    ("SIZES = {'small': 4}\n", r"SIZES must map preset names"),
    ("TAGS = 'gemm'\n", r"TAGS must be a tuple of strings"),
])
def test_malformed_metadata_is_a_one_line_error(tmp_path: Path, write_problem, header, message):
    with pytest.raises(ProblemLoadError, match=message):
        load_file(write_problem(tmp_path / "level1" / "1_x.py", header=header))


def test_missing_names_are_all_reported(tmp_path: Path):
    path = tmp_path / "level1" / "5_empty.py"
    path.parent.mkdir()
    path.write_text("import torch\n")
    with pytest.raises(ProblemLoadError) as info:
        load_file(path)
    assert str(info.value) == f"{path}: no class Model, no def get_inputs, no def get_init_inputs"


def test_unreadable_file(tmp_path: Path):
    path = tmp_path / "level1" / "1_binary.py"
    path.parent.mkdir()
    path.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ProblemLoadError, match=r"1_binary.py: cannot read"):
        load_file(path)


def test_folder_keeps_good_problems_and_reports_bad_ones(tmp_path: Path, write_problem):
    level = tmp_path / "level1"
    for name in ("2_b.py", "10_c.py", "1_a.py"):
        write_problem(level / name)
    write_problem(level / "3_broken.py", body="return (x")
    write_problem(level / "no_number.py")
    write_problem(level / "__init__.py")          # skipped, not an error
    (level / "notes.txt").write_text("ignored")
    selection = load_folder(level)
    assert [p.id for p in selection.problems] == ["level1/1_a", "level1/2_b", "level1/10_c"]
    assert len(selection.errors) == 2
    assert any("3_broken.py:6: syntax error" in e for e in selection.errors)
    assert any("no_number.py: file name does not match" in e for e in selection.errors)


@pytest.mark.parametrize("where", ["root", "levels", "checkout"])
def test_folder_forms(tmp_path: Path, write_problem, where: str):
    checkout = tmp_path / "KernelBench"
    for level in (1, 2, 10):
        write_problem(checkout / "KernelBench" / f"level{level}" / "1_p.py")
    path = {"root": checkout, "levels": checkout / "KernelBench",
            "checkout": checkout / "KernelBench" / "level2"}[where]
    levels = [p.level for p in load_folder(path).problems]
    assert levels == ([2] if where == "checkout" else [1, 2, 10])


def test_folder_without_levels_is_an_error(tmp_path: Path):
    with pytest.raises(ProblemLoadError, match="no level folders"):
        level_folders(tmp_path)
    with pytest.raises(ProblemLoadError, match="not a folder"):
        level_folders(tmp_path / "missing")


GOOD = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n" \
       "def get_inputs():\n    return [torch.randn(2)]\ndef get_init_inputs():\n    return []\n"


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_parquet_rows_become_problems(tmp_path: Path):
    path = write_parquet(tmp_path / "kb.parquet", [
        {"code": GOOD, "level": 1, "name": "19_ReLU", "problem_id": 19},
        {"code": GOOD, "level": 2, "name": "Conv2d_ReLU.py", "problem_id": 3},
        {"code": "def broken(:\n", "level": 1, "name": "7_Broken", "problem_id": 7},
        {"code": GOOD, "level": None, "name": "x", "problem_id": 4},
    ])
    selection = load_parquet(path)
    assert [(p.id, p.name, p.origin) for p in selection.problems] == [
        ("level1/19_ReLU", "ReLU", f"parquet:{path}#0"),
        ("level2/3_Conv2d_ReLU", "Conv2d_ReLU", f"parquet:{path}#1")]
    assert [e.split(":")[0:2] for e in selection.errors] == [["parquet", str(path) + "#2"],
                                                             ["parquet", str(path) + "#3"]]
    assert "syntax error" in selection.errors[0] and "bad level/problem_id" in selection.errors[1]
    module = load_module(selection.problems[0])
    assert module.get_inputs()[0].shape == (2,)


def test_parquet_without_the_columns_is_an_error(tmp_path: Path):
    path = write_parquet(tmp_path / "other.parquet", [{"text": "x"}])
    with pytest.raises(ProblemLoadError, match=r"other.parquet: cannot read parquet with columns"):
        load_parquet(path)
