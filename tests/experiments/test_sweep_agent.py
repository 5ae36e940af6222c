"""A real sweep through the agent (replay model, cpp backend): killed mid-run, then resumed.

The replayed responses contain no code, so no kernel is compiled: what is exercised is the
sweep -> agent -> run store path, the kill, the resume and the report, not the evaluator.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytest.importorskip("agent.refine")
pytest.importorskip("agent.sample")

from experiments import report, runs, sweep

PROBLEM = "level1/19_relu"


def _rows(run_dir: Path) -> dict[tuple, float]:
    with sqlite3.connect(run_dir / "attempts.sqlite") as conn:
        return {(p, i, t): w for p, i, t, w in
                conn.execute("SELECT problem_id, idx, turn, written_at FROM attempts")}


def _stored(out: Path) -> int:
    total = 0
    for db in out.glob("*/attempts.sqlite"):
        try:
            with sqlite3.connect(db) as conn:
                total += conn.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
        except sqlite3.Error:
            pass
    return total


@pytest.fixture
def config(tmp_path):
    replay = tmp_path / "replay.jsonl"
    keys = [(0, t) for t in range(3)] + [(i, 0) for i in (1, 2)]
    replay.write_text("".join(json.dumps({"problem": PROBLEM, "index": i, "turn": t, "response":
                                          f"Thinking about turn {t}; no code yet."}) + "\n"
                              for i, t in keys))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny", "models": [f"replay:{replay}"], "problems": [f"suite:{PROBLEM}"],
        "settings": {"backend": "cpp", "size": "small", "concurrency": 1,
                     "llm_args": {"replay_latency_s": 0.4}},
        "refine": {"feedback": ["G", "G+E+P"], "turns": [3]}, "sample": {}, "budget_match": True}))
    return path


def test_sweep_killed_and_resumed(config, tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    child = subprocess.Popen([sys.executable, "-m", "experiments.sweep", str(config), "--out",
                              str(out)], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while _stored(out) == 0 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(child.pid, signal.SIGKILL)   # our own child's session only
    child.wait()
    plan = sweep.expand(sweep.SweepConfig.model_validate(yaml.safe_load(config.read_text())))
    first = sweep.find_run_dir(out, plan[0].stem)
    assert first is not None, "the sweep never started its first run"
    before = _rows(first)
    assert 0 < len(before) < 3, "the kill should land inside the first run"

    assert sweep.main([str(config), "--out", str(out), "--no-confirm"]) == 0
    index = json.loads((out / sweep.INDEX).read_text())["runs"]
    assert [e["action"] for e in index] == ["resume", "start", "start"]
    assert all(e["complete"] and e["error"] is None for e in index)
    after = _rows(first)
    assert set(after) == {(PROBLEM, 0, t) for t in range(3)}
    assert all(after[k] == w for k, w in before.items()), "a stored turn was redone"
    assert runs.load_run(sweep.find_run_dir(out, plan[2].stem)).layout.indices == 3

    assert all(e["action"] == "skip" for e in sweep.execute(plan, out, dry_run=True))
    md = report.build([Path(e["path"]) for e in index], tmp_path / "report",
                      report.Stats(resamples=50)).read_text()
    assert "no_code" in md and "fast_1@N" in md
