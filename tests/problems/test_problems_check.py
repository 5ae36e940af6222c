"""Issue 12, item 4: `python -m problems check` and the degeneracy tests behind it."""

from __future__ import annotations

import json
import textwrap

import pytest

from problems.__main__ import main
from problems.degeneracy import check_problem
from problems.record import Problem


def problem(source: str, name: str = "p") -> Problem:
    return Problem(id=f"level2/1_{name}", level=2, number=1, name=name,
                   source=textwrap.dedent(source), origin=f"{name}.py")


TEMPLATE = """
import torch, torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)
        self.w = nn.Parameter(torch.randn(5))
    def forward(self, x, y):
        return {body}
def get_inputs():
    return [torch.randn(2, 3, 6, 6, 6), torch.randn(512, 64)]
def get_init_inputs():
    return []
"""


def case(body: str) -> Problem:
    return problem(TEMPLATE.format(body=body))


@pytest.mark.parametrize(("body", "finding"), [
    ("self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])", "all zeros within the fp64-relative"),
    ("self.w * 2.0", "output identical across input sets"),
    ("torch.log(y)", "non-finite reference"),
])
def test_degenerate_problems_are_named_with_the_reason(body, finding):
    check = check_problem(case(body))
    assert check.error is None and check.degenerate
    assert any(finding in f for f in check.findings), check.findings


@pytest.mark.parametrize("body", ["torch.mean((y - 1.0) ** 2)", "torch.relu(y) @ y.T",
                                  "torch.softmax(y.flatten(), 0)"])
def test_scalar_losses_and_real_outputs_are_not_degenerate(body):
    check = check_problem(case(body))
    assert check.error is None and not check.degenerate, check.findings


def test_a_looser_tolerance_can_make_a_problem_degenerate():
    wide = case("torch.softmax(y.flatten(), 0)")   # 32768 values of about 3e-5
    assert not check_problem(wide).degenerate
    loose = check_problem(wide, tolerance="kernelbench-v0")
    assert any("all zeros within the kernelbench-v0" in f for f in loose.findings)


def test_check_command_prints_a_table_and_json_over_a_folder(tmp_path, capsys):
    folder = tmp_path / "level2"
    folder.mkdir()
    (folder / "1_gn_mean.py").write_text(TEMPLATE.format(body="self.norm(self.conv(x)).mean(dim=[1, 2, 3, 4])"))
    (folder / "2_loss.py").write_text(TEMPLATE.format(body="torch.mean((y - 1.0) ** 2)"))
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "DEGENERATE" in out and "2 problems checked; 1 degenerate; 0 errors" in out
    assert main(["check", f"{tmp_path}#level2/2*", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["findings"] for r in records] == [[]] and records[0]["tolerance"] == "fp64-relative"


def test_check_of_a_spec_that_names_nothing_is_exit_2(capsys):
    assert main(["check", "suite:level9/*"]) == 2
