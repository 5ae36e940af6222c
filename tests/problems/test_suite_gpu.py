"""The suite's default sizes on a GPU (opt-in: `pytest -m gpu`): every eager reference takes about
a millisecond or more, so launch overhead does not decide speedups, and the output is not
degenerate at full size either. Each case holds the evaluator's device lock alone, as a timing
job does; it is still a `timing` test (`make gpu-check` runs those alone): in the parallel phase
its 62 cases each waited for every correctness job on the device to end (H200, 2026-12-01: 7
cases in 266 s). It needs no build, and its one time check is a lower bound that load on the host
can only help it fail, never pass (`beside_builds`): `make gpu-check` runs it while the fixtures
build, when the device is otherwise idle."""

from __future__ import annotations

import pytest
import torch
from torch.utils import benchmark

from feedback.cache import locked
from feedback.evaluate import device_lock
from feedback.options import EvalOptions
from problems import Problem, load_module, load_suite

pytestmark = [pytest.mark.gpu, pytest.mark.timing, pytest.mark.beside_builds]

MIN_MS = 0.8  # "at least ~1 ms on an H200", with room for the GPU's clock and the time of day
TOL = 0.01


def time_ms(model: torch.nn.Module, inputs: list) -> float:
    """Median milliseconds per call (torch's own benchmark timer synchronizes the device)."""
    with torch.no_grad():
        model(*inputs)  # warm-up: cuBLAS/cuDNN handles and algorithm choice
        timer = benchmark.Timer(stmt="model(*inputs)", globals={"model": model, "inputs": inputs})
        return timer.blocked_autorange(min_run_time=0.2).median * 1e3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("problem", load_suite().problems, ids=lambda p: p.id)
def test_default_size_is_gpu_sized_and_not_degenerate(problem: Problem):
    module = load_module(problem)
    with locked(device_lock(EvalOptions(device="cuda:0"))), torch.device("cuda"):
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        torch.manual_seed(1)
        inputs = module.get_inputs()
        with torch.no_grad():
            first = model(*inputs).double()
        ms = time_ms(model, inputs)
        del inputs
        torch.manual_seed(2)
        with torch.no_grad():
            second = model(*module.get_inputs()).double()
    print(f"\n{problem.id:48s} {ms:8.3f} ms  std {first.std().item():.3g}")
    assert first.abs().max() > TOL and first.max() - first.min() > 2 * TOL
    assert (first - second).abs().max() > TOL
    assert ms >= MIN_MS, f"eager reference takes {ms:.3f} ms"
    torch.cuda.empty_cache()
