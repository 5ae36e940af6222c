"""`--executor` / `--ray-address` at the command line: bad values and a missing Ray are usage
errors (exit 2, a message saying what to do) before any run directory is made."""

from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

from agent import refine, sample
from agent.settings import RefineSettings
from experiments import sweep


def test_a_bad_executor_value_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        refine.main(["--model", "replay:x.jsonl", "--executor", "dask"])
    assert exit_.value.code == 2
    assert "invalid choice: 'dask'" in capsys.readouterr().err


def test_missing_ray_is_a_usage_error_naming_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ValidationError, match=r"pip install 'kernel-refine\[ray\]'"):
        RefineSettings(model="replay:x.jsonl", executor="ray")
    for main in (refine.main, sample.main):
        assert main(["--model", "replay:x.jsonl", "--executor", "ray", "--out",
                     str(tmp_path / "runs")]) == 2
        assert "pip install 'kernel-refine[ray]'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_sweep_refuses_the_ray_executor_without_ray(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    config = tmp_path / "sweep.yaml"
    config.write_text("name: t\nmodels: [replay:x.jsonl]\nproblems: [suite:level1/19_relu]\n"
                      "refine: {turns: [1]}\n")
    with pytest.raises(SystemExit) as exit_:
        sweep.main([str(config), "--out", str(tmp_path / "out"), "--executor", "ray"])
    assert exit_.value.code == 2
    assert "pip install 'kernel-refine[ray]'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_address_without_the_ray_executor_is_refused():
    with pytest.raises(ValidationError, match="only used with --executor ray"):
        RefineSettings(model="replay:x.jsonl", ray_address="auto")


def test_a_resume_runs_where_it_is_told_not_where_the_run_started(tmp_path, scripted,
                                                                  transcript):
    from agent.runner import execute

    model = transcript({("level1/19_relu", 0, 0): "compile_error"})
    first = execute(RefineSettings(model=model, problems="suite:level1/19", backend="cpp",
                                   out=tmp_path / "runs", turns=1), "refine", evaluator=scripted)
    assert first.settings.executor == "local"
    again = execute(RefineSettings(resume=first.path, executor="ray", ray_address="auto"),
                    "refine", evaluator=scripted)  # injected: no cluster is contacted
    assert (again.settings.executor, again.settings.ray_address) == ("ray", "auto")
    assert again.settings.model == model and again.path == first.path
