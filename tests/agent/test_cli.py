"""The command lines: the missing-model message, --draw, usage errors, option mapping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import RELU

from agent.cli import run_cli
from agent.refine import main as refine_main
from agent.sample import main as sample_main

ROOT = Path(__file__).resolve().parents[2]
DEMO = "replay:experiments/demo/demo.jsonl"


def cli(module: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "KERNEL_REFINE_MODEL"}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**environment, **(env or {})}, check=False)


@pytest.mark.parametrize("module", ["agent.refine", "agent.sample"])
def test_no_model_says_how_to_choose_one_and_points_to_the_demo(module, tmp_path):
    done = cli(module, "--out", str(tmp_path / "runs"))
    assert done.returncode == 2
    assert "--model" in done.stderr and "KERNEL_REFINE_MODEL" in done.stderr
    assert "make demo" in done.stderr and "replay:experiments/demo/demo.jsonl" in done.stderr
    assert not (tmp_path / "runs").exists()


def test_draw_prints_the_graph_as_mermaid():
    done = cli("agent.refine", "--draw")
    assert done.returncode == 0
    edges = [line.strip() for line in done.stdout.splitlines() if "->" in line]
    assert "__start__ --> generate;" in edges
    for edge in ("generate -.-> compile;", "generate -.-> feedback;", "compile -.-> correct;",
                 "compile -.-> feedback;", "correct -.-> perform;", "correct -.-> feedback;",
                 "perform --> feedback;", "feedback -.-> generate;", "feedback -.-> __end__;"):
        assert edge in edges


def test_usage_errors_exit_2_with_a_message(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KERNEL_REFINE_MODEL", raising=False)
    out = str(tmp_path / "runs")
    assert refine_main(["--model", "replay:x.jsonl", "--problems", "suite:level9",
                        "--out", out]) == 2
    assert "suite:level9" in capsys.readouterr().err
    assert refine_main(["--model", "replay:missing.jsonl", "--problems", "suite:level1/19",
                        "--backend", "cpp", "--out", out]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    assert sample_main(["--model", "replay:x.jsonl", "--eval-option", "no_such=1"]) == 2
    assert "no_such" in capsys.readouterr().err
    assert refine_main(["--resume", str(tmp_path / "nowhere")]) == 2
    assert "not a run directory" in capsys.readouterr().err


@pytest.mark.parametrize("main, args, needles", [
    (refine_main, ["--feedback", "G+X"], ["--feedback", "'G+X'", "G, G+E, G+E+P"]),
    (refine_main, ["--turns", "0"], ["--turns 0", "greater than or equal to 1"]),
    (refine_main, ["--history", "some"], ["--history", "'last', 'all'"]),
    (sample_main, ["--backend", "gpu"], ["--backend", "'cuda', 'triton', 'cpp'"]),
    (sample_main, ["--log-format", "xml"], ["--log-format", "'console', 'json'"]),
    (sample_main, ["--k", "0"], ["--k 0", "greater than or equal to 1"]),
    (sample_main, ["--eval-option", "timing_trials=0"], ["--eval-option", "timing_trials 0"]),
    (refine_main, ["--eval-option", "no_such=1"], ["--eval-option", "no_such", "timing_trials"]),
    (refine_main, ["--noise-margin", "-1"], ["--noise-margin -1", "greater than or equal to 0"]),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag(main, args, needles, capsys, tmp_path):
    try:
        code = main(["--dry-run", "--model", DEMO, "--problems", "suite:level1/19",
                     "--out", str(tmp_path / "runs"), *args])  # --dry-run: nothing ever runs
    except SystemExit as e:  # argparse's own checks exit from parse_args
        code = e.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "error" in lines[0] and all(n in lines[0] for n in needles), lines[0]
    assert "pydantic" not in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_options_map_onto_the_settings(monkeypatch):
    seen = {}

    def fake_run_cli(make_settings, mode, action="run"):
        seen["settings"], seen["mode"] = make_settings(), mode
        return 0

    monkeypatch.setattr("agent.cli.run_cli", fake_run_cli)
    refine_main(["--model", "m", "--feedback", "g+e", "--turns", "3", "--history", "all",
                 "--llm-arg", "reasoning_effort=high", "--llm-arg", "max_tokens=8192",
                 "--eval-option", "timing_trials=10", "--target-speedup", "1.5", "--hardware"])
    s = seen["settings"]
    assert seen["mode"] == "refine" and s.feedback == "G+E" and s.turns == 3 and s.history == "all"
    assert s.llm_args == {"reasoning_effort": "high", "max_tokens": 8192}
    assert s.eval_options == {"timing_trials": 10} and s.target_speedup == 1.5 and s.hardware
    assert s.problems == "suite:level1" and s.backend is None  # defaults left to resolve()
    sample_main(["--model", "m", "--k", "4", "--temperature", "0.2"])
    assert seen["mode"] == "sample" and seen["settings"].k == 4
    assert seen["settings"].temperature == 0.2


def test_refine_cli_prints_the_per_turn_table(tmp_path, scripted, transcript, capsys, monkeypatch):
    from agent import runner
    from agent.settings import RefineSettings

    model = transcript({(RELU, 0, 0): "mismatch", (RELU, 0, 1): "ok 0.4 0.0"})
    real = runner.execute
    monkeypatch.setattr("agent.cli.execute",
                        lambda s, mode: real(s, mode, evaluator=scripted))
    code = run_cli(lambda: RefineSettings(model=model, problems="suite:level1/19", backend="cpp",
                                          turns=2, out=tmp_path / "runs"), "refine")
    out = capsys.readouterr().out
    assert code == 0
    assert "fast_0" in out and "fast_1" in out and "fast_2" in out and "geomean" in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert "0%" in rows[0] and "100%" in rows[1] and "2.50x" in rows[1] and "unknown" in rows[1]


@pytest.mark.parametrize("module", ["agent.refine", "agent.sample"])
def test_help_renders_every_option(module, capsys):
    """argparse formats help lazily: a stray `%` in a settings description only breaks --help."""
    import importlib

    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module).main(["--help"])
    assert exit_info.value.code == 0
    assert "--problems" in capsys.readouterr().out
