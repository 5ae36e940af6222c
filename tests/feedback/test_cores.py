"""The split of CPU cores between devices' timing workers and everything else (feedback/cores.py)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from feedback import cores
from feedback.sandbox import run_child


def test_cpp_timing_gets_the_top_cores_and_the_rest_runs_elsewhere():
    assert cores.plan(None, 1, avail=[0, 1]) == cores.CorePlan(device=(1,), others=(0,))
    assert cores.plan(None, 2, avail=[0, 1, 2, 3]) == cores.CorePlan(device=(2, 3), others=(0, 1))
    assert cores.plan(None, 1, avail=[0]) is None  # nothing would be left for the rest
    assert cores.plan(None, 2, avail=[0, 1]) is None


def test_each_gpu_gets_a_core_of_its_own_and_builds_keep_off_all_of_them():
    avail = list(range(16))
    assert cores.plan(0, avail=avail, gpus=1) == cores.CorePlan(device=(15,), others=tuple(range(15)))
    eight = [cores.plan(i, avail=avail, gpus=8) for i in range(8)]
    assert [p.device for p in eight] == [(15 - i,) for i in range(8)]
    assert all(p.others == tuple(range(8)) for p in eight)
    assert cores.plan(0, avail=[0], gpus=1) is None


def test_a_child_runs_on_the_cores_and_at_the_priority_it_is_given(tmp_path: Path):
    one = min(os.sched_getaffinity(0))
    code = "import json, os; print(json.dumps([sorted(os.sched_getaffinity(0)), os.nice(0)]))"
    out = run_child([sys.executable, "-c", code], cwd=tmp_path, env={"PATH": os.environ["PATH"]},
                    timeout_s=60, isolate=False, cpus=[one], nice=cores.BUILD_NICE)
    assert out.ok, out.stderr_tail
    where, nice = json.loads(out.stdout_tail)
    assert where == [one] and nice >= os.nice(0) + cores.BUILD_NICE - 0  # nice only goes up
