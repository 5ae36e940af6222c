"""The project's own suite: its shape, and for every problem at the small size on CPU, that it
runs fast and is not degenerate (the output depends on the inputs and on the weights, and is
neither constant nor within +-0.01 of zero)."""

from __future__ import annotations

import time
from collections import Counter

import pytest
import torch

from problems import Problem, describe_inputs, load_module, load_suite

SUITE = load_suite()
TOL = 0.01  # the loosest tolerance a harness uses (KernelBench paper): degeneracy is judged by it
REQUIRED = {
    "level1/19_relu": ["f32[16, 1024]"],
    "level1/1_square_matmul": ["f32[64, 64]", "f32[64, 64]"],
    "level2/1_gemm_bias_relu": ["f32[32, 64]"],
}


def run(problem: Problem, *, input_seed: int, weight_seed: int) -> tuple[torch.Tensor, int, list]:
    """Output, parameter count and inputs of the small size, under the given seeds."""
    module = load_module(problem, "small")
    torch.manual_seed(weight_seed)
    model = module.Model(*module.get_init_inputs())
    torch.manual_seed(input_seed)
    inputs = module.get_inputs()
    with torch.no_grad():
        output = model(*inputs)
    return output, sum(p.numel() for p in model.parameters()), inputs


def test_suite_has_enough_problems_per_level_and_loads_cleanly():
    assert not SUITE.errors
    levels = Counter(p.level for p in SUITE.problems)
    assert levels[1] >= 25 and levels[2] >= 12 and levels[3] >= 8
    assert len(SUITE.problems) >= 45
    assert len({p.id for p in SUITE.problems}) == len(SUITE.problems)
    assert len({(p.level, p.number) for p in SUITE.problems}) == len(SUITE.problems)


def test_required_ids_and_their_inputs():
    by_id = {p.id: p for p in SUITE.problems}
    for problem_id, shapes in REQUIRED.items():
        assert describe_inputs(by_id[problem_id], "small") == shapes


def test_every_problem_has_tags_a_small_preset_and_a_larger_default():
    for problem in SUITE.problems:
        assert problem.tags and "small" in problem.sizes, problem.id
        if problem.level == 2:
            assert "fusion" in problem.tags
        if problem.level == 3:
            assert "architecture" in problem.tags
        small = describe_inputs(problem, "small")
        default = describe_inputs(problem)
        assert len(small) == len(default) and small != default, problem.id


@pytest.mark.parametrize("problem", SUITE.problems, ids=lambda p: p.id)
def test_problem_runs_small_on_cpu_and_is_not_degenerate(problem: Problem):
    start = time.perf_counter()
    out, n_params, inputs = run(problem, input_seed=1, weight_seed=0)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"small size took {elapsed:.2f}s"

    # Inputs are signed floats (uniform [0, 1) inputs make ReLU an identity) and float32.
    floats = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    assert floats and all(x.dtype == torch.float32 and (x < 0).any() for x in floats)

    assert isinstance(out, torch.Tensor) and torch.isfinite(out.double()).all()
    assert out.dtype in (torch.float32, torch.int64)
    values = out.double()
    assert values.abs().max() > TOL, "every output within +-0.01 of zero"
    assert values.max() - values.min() > 2 * TOL, "output is (nearly) constant"
    if values.numel() > 1:
        assert values.std() > TOL, "outputs barely vary"

    other_inputs, _, _ = run(problem, input_seed=2, weight_seed=0)
    assert (other_inputs.double() - values).abs().max() > TOL, "output ignores the inputs"
    if n_params:
        other_weights, _, _ = run(problem, input_seed=1, weight_seed=5)
        assert (other_weights.double() - values).abs().max() > TOL, "output ignores the weights"

    again, _, _ = run(problem, input_seed=1, weight_seed=0)
    assert torch.equal(again, out), "not deterministic under fixed seeds"
