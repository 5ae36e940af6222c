"""Re-evaluation with an injected evaluator (FABRICATED results, see conftest.py)."""

from __future__ import annotations

import pytest

from agent.store import RunStore
from experiments import reevaluate
from experiments.runs import load_run

SPEC = "suite:level1/19,suite:level2/1"
RELU, GEMM = "level1/19_relu", "level2/1_gemm_bias_relu"


class FakeEvaluate:
    """Halves every speedup (as if the new GPU were less kind); can die after some calls."""

    def __init__(self, make, die_after: int | None = None):
        self.make, self.die_after, self.calls = make, die_after, []

    def __call__(self, problem, code, backend, options):
        if self.die_after is not None and len(self.calls) == self.die_after:
            raise KeyboardInterrupt  # a kill, not an evaluator result
        self.calls.append((problem.id, code, backend, options.size))
        self.options = options
        return self.make(problem.id, eager=1.0).result.model_copy(update={"backend": backend})


@pytest.fixture
def source(tmp_path, attempt, store_factory):
    attempts = [attempt(RELU, 0, 0, status="compile_error", code="v0"),
                attempt(RELU, 0, 1, eager=2.0, code="v1"),
                attempt(GEMM, 0, 0, status="no_code")]
    store_factory(tmp_path / "src", "refine", {"name": "demo", "problems": SPEC, "turns": 2,
                                               "backend": "cpp", "size": "small",
                                               "eval_options": {"timing_trials": 7,
                                                                "device": "cuda:3"}}, attempts,
                  run_id="src-run")
    return tmp_path / "src"


def test_reevaluate_every_kernel_and_resume(source, tmp_path, attempt):
    dying = FakeEvaluate(attempt, die_after=1)
    with pytest.raises(KeyboardInterrupt):
        reevaluate.reevaluate(source, "cuda", tmp_path / "new", evaluate=dying)
    (partial,) = (tmp_path / "new").iterdir()
    assert len(RunStore.open(partial).done_keys()) == 1
    finishing = FakeEvaluate(attempt)
    path = reevaluate.reevaluate(source, "cuda", resume=partial, evaluate=finishing)
    assert path == partial
    assert dying.calls + finishing.calls == [(RELU, "v0", "cuda", "small"),
                                             (RELU, "v1", "cuda", "small")]  # no LLM, no redo
    assert (finishing.options.timing_trials, finishing.options.device) == (7, "cuda:0")
    run = load_run(path)
    assert run.config["backend"] == "cuda" and run.config["source_run_id"] == "src-run"
    assert run.config["reevaluated_from"] == str(source)
    assert set(run.grid) == set(load_run(source).grid)
    assert run.grid[(GEMM, 0, 0)].result is None                 # no code stays no code
    assert run.grid[(RELU, 0, 0)].result.status.value == "ok"    # the fake says so
    assert all(a.candidate.run_id == path.name for a in run.grid.values())
    with pytest.raises(ValueError):
        reevaluate.reevaluate(source, "triton", resume=partial, evaluate=finishing)
