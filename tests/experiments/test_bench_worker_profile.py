"""The worker profile runs real worker jobs and says where their seconds went. It runs in a
process of its own, like a worker: a job installs the build accelerator for its process."""

from __future__ import annotations

import json
import subprocess
import sys

from experiments.bench.worker_profile import main
from feedback.environment import REPO_ROOT


def test_each_job_is_profiled_twice_with_its_phases(tmp_path):
    done = subprocess.run([sys.executable, "-m", "experiments.bench.worker_profile", "--problems",
                           "19_relu", "--jobs", "correct/candidate", "--out", str(tmp_path)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads((tmp_path / "jobs.json").read_text())
    assert [r["job"] for r in rows] == ["19_relu-correct-candidate-0", "19_relu-correct-candidate-1"]
    assert all(r["status"] == "ok" and "trials" in r["phases"] for r in rows)
    assert "run_correct" in (tmp_path / "19_relu-correct-candidate-1.txt").read_text()
    assert done.stdout.count('"status": "ok"') == 2


def test_an_unknown_job_is_a_one_line_error(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["--jobs", "time/nobody", "--out", str(tmp_path)])
    assert "--jobs: unknown" in capsys.readouterr().err
