"""`python -m feedback.worker JOB.json` end to end, in processes of their own.

Tampering candidates run here rather than in-process: they patch `torch` for good.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from workerkit import GELU, MATMUL, REPO

from feedback.result import Status

HONEST = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""


def test_end_to_end_report_is_written_with_the_nonce(kit):
    code, report = kit.run_child("correct", MATMUL, HONEST)
    assert code == 0 and report is not None
    assert report.nonce == f"nonce-{kit.count}" and report.status == Status.ok, report.message
    assert report.correctness.trials_passed == report.correctness.trials >= 3
    assert report.environment is not None and report.environment.torch


def test_patching_torch_is_caught_as_tampering(kit):
    # the reference would call the patched gelu too and agree with the candidate
    code, report = kit.run_child("correct", GELU, """
        import torch, torch.nn as nn, torch.nn.functional as F
        F.gelu = lambda x, approximate="none": x * torch.sigmoid(1.702 * x)
        class ModelNew(nn.Module):
            def forward(self, x):
                return F.gelu(x)
    """)
    assert code == 0 and report.status == Status.guard_violation
    assert "torch.nn.functional.gelu replaced" in report.message


def test_patching_the_clock_or_precision_flags_in_forward_is_caught(kit):
    code, report = kit.run_child("time", MATMUL, """
        import time, torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                time.perf_counter = lambda: 0.0
                torch.backends.cuda.matmul.allow_tf32 = True
                return torch.mm(a, b)
    """)
    assert code == 0 and report.status == Status.guard_violation
    assert "time.perf_counter replaced" in report.message and "allow_tf32" in report.message


def test_a_forged_report_at_exit_does_not_replace_the_real_one(kit):
    code, report = kit.run_child("correct", MATMUL, """
        import atexit, json, sys, torch, torch.nn as nn
        job = json.load(open(sys.argv[1]))
        def forge():
            open(job["result_path"], "w").write(json.dumps({"nonce": job["nonce"], "status": "ok"}))
        atexit.register(forge)
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return torch.mm(a, b) * 2
    """)
    assert code == 0 and report.status == Status.mismatch


def test_an_unreadable_job_file_exits_non_zero(tmp_path):
    bad = tmp_path / "job.json"
    bad.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "feedback.worker", str(bad)], cwd=REPO,
                          capture_output=True, timeout=120)
    assert proc.returncode == 2 and b"cannot read the job file" in proc.stderr


def test_a_job_after_the_standby_imports_imports_little_more(tmp_path):
    """What `import_ahead` leaves out, a job imports while it holds the device."""
    import subprocess
    import sys

    from tests.feedback.worker.workerkit import REPO

    script = f"""
import sys, tempfile
from pathlib import Path
sys.path.insert(0, {str(REPO / 'tests/feedback/worker')!r})
import torch
from feedback.worker.run import import_ahead, run_job
import_ahead()
from workerkit import Kit, GELU
kit = Kit(Path({str(tmp_path)!r}))
job = kit.job("correct", GELU, "import torch\\nclass ModelNew(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.nn.functional.gelu(x)\\n")
before = set(sys.modules)
report = run_job(job)
print(report.status.value, sorted({{m.split('.')[0] for m in set(sys.modules) - before}}))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False,
                         timeout=300).stdout.strip().splitlines()[-1]
    status, roots = out.split(" ", 1)
    assert status == "ok"
    assert not {"setuptools", "distutils", "numpy", "filelock"} & set(eval(roots)), roots


@pytest.mark.parametrize("ahead", ["compile", ""])
def test_a_compile_baselines_standby_imports_torch_compile_ahead(ahead):
    """With `AHEAD_ENV` set to `compile` (the compile baseline's spec, feedback/job.py) the
    standby's imports include torch.compile's; without it they do not."""
    from feedback.job import AHEAD_ENV

    script = ("import sys\nfrom feedback.worker.run import COMPILE_IMPORTS, import_ahead\n"
              "import_ahead()\nprint([m in sys.modules for m in COMPILE_IMPORTS])\n")
    env = {**os.environ, AHEAD_ENV: ahead, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                         check=False, timeout=300, env=env).stdout.strip().splitlines()[-1]
    assert out == str([bool(ahead)] * 2)
