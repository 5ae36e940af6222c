"""A KernelBench checkout in miniature (tests/fixtures/kernelbench): every good problem loads and
constructs its Model from get_init_inputs(); every bad file yields one line naming it."""

from __future__ import annotations

from pathlib import Path

import torch

from problems import ProblemLoadError, load_module, select

GOOD = {
    "level1/1_Square_matrix_multiplication_", "level1/19_ReLU", "level1/23_Softmax",
    "level1/40_LayerNorm", "level2/1_Conv2D_ReLU_BiasAdd", "level2/12_Gemm_Multiply_LeakyReLU",
    "level3/1_MLP", "level3/2_GRUCell",
}
BAD_AT_LOAD = {  # caught by parsing alone
    "level1/7_Broken_syntax.py": "syntax error",
    "level1/8_No_model.py": "no class Model",
    "level1/relu_without_number.py": "file name does not match",
    "level2/13_Missing_get_inputs.py": "no def get_inputs",
}
BAD_AT_EXECUTION = {  # valid files whose top level fails when run
    "level2/14_Imports_missing_module": "import error: No module named",
    "level3/3_Raises_at_import": "ZeroDivisionError",
}


def construct_all(root: Path) -> tuple[dict[str, torch.Tensor], list[str]]:
    """What a user pointing the tool at a checkout gets: outputs per id, and every error line."""
    selection = select(str(root))
    outputs: dict[str, torch.Tensor] = {}
    errors = list(selection.errors)
    for problem in selection.problems:
        try:
            module = load_module(problem)
        except ProblemLoadError as exc:
            errors.append(str(exc))
            continue
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        with torch.no_grad():
            outputs[problem.id] = model(*module.get_inputs())
    return outputs, errors


def test_checkout_root_lists_every_parsable_problem(kernelbench_root: Path):
    selection = select(str(kernelbench_root))
    assert {p.id for p in selection.problems} == GOOD | set(BAD_AT_EXECUTION)
    assert [p.level for p in selection.problems] == sorted(p.level for p in selection.problems)


def test_good_problems_construct_and_run_bad_ones_name_their_file(kernelbench_root: Path):
    outputs, errors = construct_all(kernelbench_root)
    assert set(outputs) == GOOD
    assert all(torch.isfinite(out).all() for out in outputs.values())
    expected = {**BAD_AT_LOAD, **{f"{k}.py": v for k, v in BAD_AT_EXECUTION.items()}}
    assert len(errors) == len(expected)
    for file, what in expected.items():
        lines = [e for e in errors if str(Path(file)) in e]
        assert len(lines) == 1, (file, errors)
        assert what in lines[0] and "\n" not in lines[0]


def test_one_level_and_one_problem_of_the_checkout(kernelbench_root: Path):
    level2 = select(str(kernelbench_root / "KernelBench" / "level2"))
    assert {p.level for p in level2.problems} == {2} and len(level2.errors) == 1
    relu = select(f"{kernelbench_root}#level1/relu")
    assert [p.id for p in relu.problems] == ["level1/19_ReLU"]
    single = select(str(kernelbench_root / "KernelBench" / "level1" / "19_ReLU.py"))
    assert [p.id for p in single.problems] == ["level1/19_ReLU"] and not single.errors
