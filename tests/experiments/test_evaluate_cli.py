"""`python -m experiments.evaluate` on the cpp backend with the real evaluator.

The kernels are experiments/bench/candidates/cpp (ReLU, matmul: two C++ builds, cached in the
shared compile cache) and a copy of the ReLU one that the static screen rejects (no build).
Bad-input tests build nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent.store import RunStore
from experiments import evaluate as rescoring
from experiments import report
from experiments.runs import load_run
from problems.loaders import SUITE_ROOT

CANDIDATES = Path(__file__).parents[2] / "experiments" / "bench" / "candidates" / "cpp"
RELU, MATMUL = "level1/19_relu", "level1/1_square_matmul"
FAST = {"timing_trials": 10, "warmup": 1, "compile_baseline": False, "run_timeout_s": 300}


@pytest.fixture
def folder(tmp_path) -> Path:
    """Two real kernels and one that imports subprocess, in KernelBench's run layout."""
    folder = tmp_path / "kb_run"
    folder.mkdir()
    for path in CANDIDATES.glob("*.py"):
        shutil.copy(path, folder / path.name)
    relu = (CANDIDATES / "level_1_problem_19_sample_0_kernel.py").read_text()
    (folder / "level_1_problem_19_sample_1_kernel.py").write_text(relu + "\nimport subprocess\n")
    (folder / "notes.txt").write_text("not a kernel")
    return folder


def _code(argv: list[str]) -> int:
    """The exit status of the CLI (a usage error exits from inside the parser)."""
    try:
        return rescoring.main(argv)
    except SystemExit as e:
        return e.code


def _statuses(path: Path) -> dict[tuple[str, int], str]:
    return {(a.candidate.problem_id, a.candidate.index): a.result.status.value
            for a in RunStore.open(path).attempts()}


@pytest.mark.slow
def test_killed_run_resumes_without_redoing_and_report_reads_it(folder, tmp_path):
    out = tmp_path / "run"
    call = {"source": folder, "problems": str(SUITE_ROOT), "backend": "cpp", "out": out,
            "size": "small", "eval_options": FAST, "progress": False}

    def kill(attempt):
        raise KeyboardInterrupt  # as Ctrl-C after the first stored result

    with pytest.raises(KeyboardInterrupt):
        rescoring.rescore(**call, on_stored=kill)
    first = RunStore.open(out).written_at()
    assert len(first) == 1

    resumed = rescoring.rescore(**call)
    assert (resumed.total, resumed.skipped, resumed.evaluated) == (3, 1, 2)
    assert _statuses(out) == {(RELU, 0): "ok", (RELU, 1): "static_reject", (MATMUL, 0): "ok"}
    after = RunStore.open(out).written_at()
    assert all(after[key] == when for key, when in first.items())  # not evaluated again

    again = rescoring.rescore(**call)
    assert (again.skipped, again.evaluated) == (3, 0)

    run = load_run(out)
    assert run.mode == "sample" and run.budget_size == 2
    assert set(run.layout.problems) == {RELU, MATMUL} and not run.warnings
    assert all(a.gpu_seconds > 0 for a in run.attempts() if a.result.status.value == "ok")
    md = report.build([out], tmp_path / "report", report.Stats(resamples=50, seed=1)).read_text()
    assert "fast_0" in md or "fast_p" in md


@pytest.mark.slow
def test_jsonl_through_the_cli(tmp_path, capsys):
    lines = [{"problem": RELU, "kernel": (CANDIDATES / "level_1_problem_19_sample_0_kernel.py")
              .read_text()},
             {"problem": "level1/1", "kernel": (CANDIDATES / "level_1_problem_1_sample_0_kernel.py")
              .read_text(), "sample": 3}]
    source = tmp_path / "kernels.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n\n")
    options = [arg for k, v in FAST.items() for arg in ("--eval-option", f"{k}={json.dumps(v)}")]
    argv = [str(source), "--problems", "suite:level1", "--backend", "cpp", "--size", "small",
            "--out", str(tmp_path / "run"), "--no-progress", *options]
    assert rescoring.main(argv) == 0
    assert _statuses(tmp_path / "run") == {(RELU, 0): "ok", (MATMUL, 3): "ok"}
    printed = capsys.readouterr().out
    assert "2 evaluated now, 0 already stored" in printed and "ok 2" in printed


@pytest.mark.parametrize("content, wanted", [
    ('{"problem": "level1/19", "kernel": "x"}\n{oops\n', "kernels.jsonl:2: not valid JSON"),
    ('["level1/19", "x"]\n', "kernels.jsonl:1: expected an object"),
    ('{"problem": "level7/1", "kernel": "x"}\n', "kernels.jsonl:1: no problem among"),
    ('{"problem": "level1/19", "kernel": "x", "sample": -1}\n', "non-negative integer"),
    (('{"problem": "level1/19", "kernel": "x", "sample": 0}\n'
      '{"problem": "level1/19_relu", "kernel": "y", "sample": 0}\n'), "also given by"),
    ("\n", "no kernels"),
])
def test_bad_jsonl_is_one_line_and_nothing_is_stored(tmp_path, capsys, content, wanted):
    (tmp_path / "kernels.jsonl").write_text(content)
    argv = [str(tmp_path / "kernels.jsonl"), "--problems", "suite:", "--backend", "cpp",
            "--out", str(tmp_path / "run")]
    assert _code(argv) == 2
    err = capsys.readouterr().err
    assert wanted in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "run").exists()


def test_bad_folders_options_and_a_clashing_run_dir(folder, tmp_path, capsys):
    base = ["--problems", "suite:", "--backend", "cpp", "--out", str(tmp_path / "run")]
    (folder / "level_1_problem_99_sample_0_kernel.py").write_text("x")
    cases = [([str(tmp_path / "missing"), *base], "no such folder or JSONL file"),
             ([str(folder), *base], "no problem for level_1_problem_99_sample_0_kernel.py"),
             ([str(folder), *base[:1], "nowhere", *base[2:]], "--problems: nowhere: no such file"),
             ([str(folder), *base, "--eval-option", "timing_trials=0"],
              "--eval-option timing_trials"),
             ([str(folder), *base, "--eval-option", "no_such=1"], "--eval-option no_such")]
    for argv, wanted in cases:
        if wanted.startswith("--eval"):
            (folder / "level_1_problem_99_sample_0_kernel.py").unlink(missing_ok=True)
        assert _code(argv) == 2
        err = capsys.readouterr().err
        assert wanted in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert _code([str(folder), *base, "--size", "huge"]) == 2
    assert "has no size 'huge'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    other = tmp_path / "other.jsonl"
    other.write_text('{"problem": "level1/19", "kernel": "import subprocess"}\n')
    assert rescoring.main([str(other), *base, "--no-progress"]) == 0  # static reject: no build
    assert _code([str(folder), *base]) == 2
    assert "holds another evaluation (source" in capsys.readouterr().err
    assert _code([str(folder), *base, "--devices", "gpu0"]) == 2
    assert "--devices: expected cuda:N" in capsys.readouterr().err
