"""`python -m experiments.sweep CONFIG --executor ray` on a local Ray instance (2 CPUs, no GPU):
replayed cpp kernels evaluated by Ray workers, the stage worker killed during the first
correctness check, and every attempt still stored exactly once, by the driver.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import ray
import yaml

sys.path.insert(0, str(Path(__file__).parents[1] / "feedback"))  # tests/feedback/candidates.py

from candidates import BROKEN_CPP, cpp_candidate

from agent.store import RunStore
from experiments import sweep
from feedback import ray_workers

pytestmark = pytest.mark.slow

PROBLEM = "level1/19_relu"
CODE = {(0, 0): cpp_candidate("relu_wrong"), (0, 1): cpp_candidate("relu"),
        (1, 0): cpp_candidate(source=BROKEN_CPP), (1, 1): cpp_candidate("relu")}
STATUS = {(0, 0): "mismatch", (0, 1): "ok", (1, 0): "compile_error", (1, 1): "ok"}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False)  # never a running cluster
    yield
    ray.shutdown()


@pytest.fixture
def config(tmp_path) -> Path:
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(json.dumps({
        "problem": PROBLEM, "index": i, "turn": t,
        "response": f"Turn {t}.\n```python\n{code}```\n"}) + "\n" for (i, t), code in CODE.items()))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "ray-tiny", "models": [f"replay:{replay}"], "problems": [f"suite:{PROBLEM}"],
        "settings": {"backend": "cpp", "size": "small", "concurrency": 2, "eval_options": {
            "timing_trials": 5, "warmup": 1, "compile_baseline": False, "run_timeout_s": 60}},
        "refine": {"feedback": ["G+E"], "turns": [2], "trajectories": 2}}))
    return path


def test_sweep_on_ray_stores_every_attempt_once_despite_a_killed_worker(
        local_ray, config, tmp_path, monkeypatch):
    writes: Counter = Counter()
    original_write = RunStore.write_attempt

    def counting_write(self, attempt, **kw):
        writes[(attempt.candidate.problem_id, attempt.candidate.index, attempt.candidate.turn)] += 1
        original_write(self, attempt, **kw)

    pools: list = []
    original_init, original_call = ray_workers.ActorPool.__init__, ray_workers.ActorPool.call

    def keep_pool(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        pools.append(self)

    def call_then_kill(self, stage, *args):
        if not getattr(self, "killer", None):  # first stage call: kill its worker in 0.8 s
            (worker,) = self.workers()
            self.killer = threading.Timer(0.8, os.kill, (worker.pid, signal.SIGKILL))
            self.killer.start()
        return original_call(self, stage, *args)

    monkeypatch.setattr(RunStore, "write_attempt", counting_write)
    monkeypatch.setattr(ray_workers.ActorPool, "__init__", keep_pool)
    monkeypatch.setattr(ray_workers.ActorPool, "call", call_then_kill)

    out = tmp_path / "out"
    assert sweep.main([str(config), "--out", str(out), "--executor", "ray"]) == 0

    (entry,) = json.loads((out / sweep.INDEX).read_text())["runs"]
    assert entry["complete"] and entry["error"] is None
    run_dir = Path(entry["path"])
    assert json.loads((run_dir / "config.json").read_text())["config"]["executor"] == "ray"
    with sqlite3.connect(run_dir / "attempts.sqlite") as conn:
        rows = {(p, i, t): s for p, i, t, s in
                conn.execute("SELECT problem_id, idx, turn, status FROM attempts")}
    assert rows == {(PROBLEM, i, t): s for (i, t), s in STATUS.items()}
    assert set(writes.values()) == {1} and len(writes) == len(STATUS), writes
    (pool,) = pools
    assert pool.retried >= 1, "the kill did not land on a running stage call"
