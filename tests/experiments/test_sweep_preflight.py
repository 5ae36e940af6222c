"""`experiments.sweep` before it runs: --dry-run prints the plan, a failed preflight stops the
sweep before its first run, and config mistakes are one line (main() itself, no subprocess)."""

from __future__ import annotations

import pytest
import yaml

from experiments.sweep import main

DEMO = "replay:experiments/demo/demo.jsonl"


def write(tmp_path, **over) -> str:
    config = {"name": "t", "models": [DEMO], "problems": ["suite:level1/19"],
              "settings": {"backend": "cpp", "size": "small"},
              "refine": {"feedback": ["G+E"], "turns": [3]}, "sample": {"k": [4]}, **over}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def test_dry_run_prints_every_run_with_its_most_calls(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main([write(tmp_path), "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in printed.splitlines()
            if line.startswith("| ")}
    refine = next(line for name, line in rows.items() if name.startswith("GE_N3"))
    sample = next(line for name, line in rows.items() if name.startswith("k4"))
    assert "| refine | start  | 1        | 1" in refine and "| 3     | 3  " in refine
    assert "| sample | start  | 1        | 4" in sample and "profile=False" in sample
    assert "| all runs" in printed and "| 7 " in rows["all runs"]
    assert not out.exists()


def test_a_failed_preflight_stops_the_sweep_before_any_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "runs"
    code = main([write(tmp_path, models=[DEMO, "openai/gpt-4o"],
                       problems=["suite:level1/19", "suite:level9"]), "--out", str(out)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and not out.exists()
    assert len(lines) == 2  # each distinct failure once, whatever number of runs share it
    assert sum("needs OPENAI_API_KEY" in line for line in lines) == 1
    assert sum("suite:level9: matched no problem" in line for line in lines) == 1


@pytest.mark.parametrize("over, needles", [
    ({"refine": {"turns": [0]}}, ["turns 0", "greater than or equal to 1"]),
    ({"settings": {"backend": "gpu"}}, ["backend 'gpu'", "'cuda', 'triton' or 'cpp'"]),
    ({"modles": ["x"]}, ["modles: unknown name"]),
])
def test_a_config_mistake_is_one_line_naming_the_key(over, needles, tmp_path, capsys):
    try:
        code = main([write(tmp_path, **over), "--out", str(tmp_path / "runs")])
    except SystemExit as e:  # the file itself is wrong: argparse's exit
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and "pydantic" not in err and not (tmp_path / "runs").exists()
    for line in err.splitlines():  # one line per run the mistake reaches
        assert all(n in line for n in needles), line
