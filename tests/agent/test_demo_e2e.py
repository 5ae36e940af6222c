"""The offline demo end to end: the real CLI, replay model and LocalEvaluator on the cpp backend.

One run serves every check: it is killed (SIGKILL, whole process group) once its first attempts
are stored, then resumed with `--resume`; the resumed run must not redo a stored attempt and must
finish with every outcome of the demo transcript. Real C++ compiles: the first run on a machine
builds the demo's extensions (about a minute each); later runs hit the evaluator's cache.
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

from agent.store import RunStore

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RELU, MATMUL, GEMM = "level1/19_relu", "level1/1_square_matmul", "level2/1_gemm_bias_relu"
DEMO = ["--model", "replay:experiments/demo/demo.jsonl", "--backend", "cpp", "--size", "small",
        "--problems", "suite:level1/19,suite:level1/1,suite:level2/1"]
EXPECTED = {  # (problem, turn) -> status (None: the response had no code block)
    (RELU, 0): "compile_error", (RELU, 1): "mismatch", (RELU, 2): "ok", (RELU, 3): "ok",
    (MATMUL, 0): "ok", (MATMUL, 1): "static_reject", (MATMUL, 2): "ok", (MATMUL, 3): None,
    (GEMM, 0): "mismatch", (GEMM, 1): "runtime_error", (GEMM, 2): "ok", (GEMM, 3): None}


def start(module: str, *args: str, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT,
                            stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def written(run_dir: Path) -> dict[tuple[str, int, int], float]:
    with sqlite3.connect(run_dir / "attempts.sqlite") as conn:
        rows = conn.execute("SELECT problem_id, idx, turn, written_at FROM attempts").fetchall()
    return {(p, i, t): w for p, i, t, w in rows}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """(run dir, attempts stored before the kill, output of the resumed run)."""
    tmp = tmp_path_factory.mktemp("demo")
    first = start("agent.refine", *DEMO, "--turns", "4", "--feedback", "G+E+P",
                  "--out", str(tmp / "runs"), log=tmp / "first.log")
    deadline = time.monotonic() + 900
    run_dir, before = None, {}
    while time.monotonic() < deadline and first.poll() is None:
        dirs = list((tmp / "runs").glob("*/attempts.sqlite"))
        if dirs:
            run_dir = dirs[0].parent
            before = written(run_dir)
            if len(before) >= 3:
                break
        time.sleep(0.5)
    assert first.poll() is None, (tmp / "first.log").read_text()[-3000:]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = written(run_dir)
    assert 3 <= len(before) < len(EXPECTED)
    resumed = subprocess.run([sys.executable, "-m", "agent.refine", "--resume", str(run_dir),
                              "--log-format", "json"], cwd=ROOT, capture_output=True, text=True,
                             timeout=1800, check=False)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return run_dir, before, resumed


def test_resume_after_a_kill_redoes_no_stored_attempt(demo_run):
    run_dir, before, _ = demo_run
    after = written(run_dir)
    assert set(after) == {(p, 0, t) for p, t in EXPECTED}
    assert {key: after[key] for key in before} == before  # not evaluated (nor written) again


def test_the_demo_shows_every_outcome(demo_run):
    run_dir, _, _ = demo_run
    attempts = {(a.candidate.problem_id, a.candidate.turn): a for a in RunStore(run_dir).attempts()}
    statuses = {key: a.result.status.value if a.result else None for key, a in attempts.items()}
    assert statuses == EXPECTED
    assert "was not declared in this scope" in attempts[(RELU, 0)].result.message
    assert attempts[(GEMM, 0)].result.correctness.trials_passed == 0
    for key in [(RELU, 2), (MATMUL, 0), (MATMUL, 2), (GEMM, 2)]:
        result = attempts[key].result
        assert result.speedup_eager is not None and result.noise is not None
        assert result.profile is not None  # G+E+P asks for the profile
        print(key, f"{result.speedup_eager:.2f}x vs eager, noise {result.noise:.2f}")
    trajectories = {t.problem_id: t for t in RunStore(run_dir).trajectories()}
    assert trajectories[RELU].best_per_turn[:3] == [None, None, 2]
    assert trajectories[MATMUL].best_per_turn[0] == 0
    assert trajectories[GEMM].best_per_turn == [None, None, 2, 2]
    # the feedback of each failure reached the next prompt
    assert "was not declared in this scope" in attempts[(RELU, 1)].candidate.prompt[-1]["content"]
    assert "load_inline" in attempts[(MATMUL, 2)].candidate.prompt[-1]["content"]


def test_the_resumed_run_prints_the_table_and_logs_json(demo_run):
    run_dir, _, resumed = demo_run
    rows = [line for line in resumed.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 4  # one per turn
    assert rows[0].split("│")[2].strip() == "33%"  # fast_0 after turn 1: the naive matmul
    assert rows[2].split("│")[2].strip() == "100%"  # every problem correct by turn 3
    assert "unknown" in rows[-1]  # replayed responses have no price
    lines = [json.loads(line) for line in (run_dir / "run.log").read_text().splitlines()
             if line.startswith("{")]
    attempt = next(entry for entry in lines if entry.get("event") == "attempt")
    assert {"run", "problem", "trajectory", "turn", "status"} <= attempt.keys()


def test_sampling_draws_k_one_shot_samples_into_the_same_store(demo_run, tmp_path):
    done = subprocess.run([sys.executable, "-m", "agent.sample", *DEMO[:6], "--problems",
                           "suite:level2/1", "--k", "2", "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    [run_dir] = tmp_path.iterdir()
    store = RunStore(run_dir)
    assert store.record().mode == "sample" and store.record().config["k"] == 2
    attempts = store.attempts()
    assert [(a.candidate.index, a.candidate.turn) for a in attempts] == [(0, 0), (1, 0)]
    assert [a.result.status.value for a in attempts] == ["mismatch", "ok"]
    assert all(len(a.candidate.prompt) == 2 for a in attempts)  # one shot: no history
    assert "best of 2" in done.stdout
