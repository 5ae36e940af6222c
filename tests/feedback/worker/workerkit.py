"""Helpers of the worker's tests: tiny problems written inline, candidates as source strings.

Most candidates are pure Python (torch ops): the worker does not care how a candidate computes,
so its guards, comparisons and clocks can be tested without building an extension. Jobs run
in-process through `run_job` unless a test needs a process of its own (tampering, exit paths).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from feedback.job import WorkerJob, WorkerReport
from feedback.options import EvalOptions
from problems.record import Problem

REPO = Path(__file__).resolve().parents[3]

MATMUL = """
import torch
import torch.nn as nn

M, K, N = 32, 1024, 24

class Model(nn.Module):
    def forward(self, a, b):
        return a @ b

def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]

def get_init_inputs():
    return []
"""

GELU = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x)

def get_inputs():
    return [torch.randn(64, 512)]

def get_init_inputs():
    return []
"""

LINEAR = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)
    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(16, 64)]

def get_init_inputs():
    return [64, 32]
"""


def problem(source: str, name: str = "tiny", sizes: dict | None = None) -> Problem:
    return Problem(id=f"level1/1_{name}", level=1, number=1, name=name,
                   source=textwrap.dedent(source), origin=f"{name}.py", sizes=sizes or {})


class Kit:
    """Writes candidates and jobs into a temporary directory and runs them."""

    def __init__(self, root: Path):
        self.root = root
        self.count = 0
        self.last_stderr = ""

    def job(self, kind: str, source: str | Problem, candidate: str | None, role: str = "candidate",
            candidate_path: Path | None = None, extensions_dir: Path | None = None,
            backend: str = "cpp", **options) -> WorkerJob:
        """A job (cpp unless told); `source` is a problem's text or a `Problem`; `candidate` a
        source text."""
        self.count += 1
        path = candidate_path
        if candidate is not None:
            path = self.root / f"candidate_{self.count}.py"
            path.write_text(textwrap.dedent(candidate))
        options.setdefault("correctness_trials", 3)
        options.setdefault("timing_trials", 10)
        options.setdefault("warmup", 1)
        options.setdefault("library_ops", "allow")  # pure-Python candidates have no kernel of their own
        return WorkerJob(kind=kind, role=role,
                         problem=source if isinstance(source, Problem) else problem(source),
                         backend=backend, options=EvalOptions(**options),
                         candidate_path=str(path) if path else None,
                         extensions_dir=str(extensions_dir or self.root / "ext"),
                         scratch_dir=str(self.root),
                         result_path=str(self.root / f"result_{self.count}.json"),
                         nonce=f"nonce-{self.count}")

    def run(self, kind: str, source: str | Problem, candidate: str | None, **kw) -> WorkerReport:
        from feedback.worker import run_job

        report = run_job(self.job(kind, source, candidate, **kw))
        assert report.nonce == f"nonce-{self.count}"
        return report

    def run_child(self, kind: str, source: str, candidate: str | None, env: dict[str, str] | None = None,
                  **kw) -> tuple[int, WorkerReport | None]:
        """`python -m feedback.worker JOB.json` in a process of its own (`env`: added to this one's)."""
        job = self.job(kind, source, candidate, **kw)
        job_path = self.root / f"job_{self.count}.json"
        job_path.write_text(job.model_dump_json())
        # the repository first, then whatever else the tests run with (a GPU host's bundle)
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, **(env or {}), "PYTHONPATH": path}
        proc = subprocess.run([sys.executable, "-m", "feedback.worker", str(job_path)], check=False, cwd=REPO,
                              env=env, capture_output=True, timeout=300)
        self.last_stderr = proc.stderr.decode(errors="replace")
        result = Path(job.result_path)
        report = WorkerReport.model_validate(json.loads(result.read_text())) if result.exists() else None
        return proc.returncode, report
