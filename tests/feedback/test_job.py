"""The parent trusts a worker's report only from its own channel: exit 0, valid, nonce echoed.

A stand-in worker (a few lines of Python, no torch) plays each way a child can end.
"""

from __future__ import annotations

import sys

import pytest

from feedback import job as job_module
from feedback.job import WorkerJob, launch
from feedback.options import EvalOptions
from feedback.result import Status


def stand_in(monkeypatch, body: str) -> None:
    """Make `python -m feedback.worker JOB` run `body` with `job` (a dict) and `out` defined."""
    script = ("import json, sys, os\njob = json.load(open(sys.argv[1]))\nout = job['result_path']\n"
              + body)
    monkeypatch.setattr(job_module, "worker_entry", lambda: [sys.executable, "-c", script])


def run(relu, tmp_path, timeout_s: float = 20):
    options = EvalOptions(cache_dir=tmp_path / "cache")
    return launch("correct", relu, "cpp", options, candidate=None,
                  extensions_dir=tmp_path / "ext", arch=None, gpu_index=None, timeout_s=timeout_s)


REPORT = "json.dump({'nonce': NONCE, 'status': 'ok', 'message': 'fine'}, open(out, 'w'))\n"


def test_a_valid_report_is_trusted(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, REPORT.replace("NONCE", "job['nonce']"))
    got = run(relu, tmp_path)
    assert got.trusted and got.report.status == Status.ok and got.report.message == "fine"


@pytest.mark.parametrize("body,status,words", [
    (REPORT.replace("NONCE", "'guessed'"), Status.runtime_error, "forged or missing result"),
    ("open(out, 'w').write('{\"status\": \"ok\"')\n", Status.runtime_error, "forged or missing"),
    ("print('all good')\n", Status.runtime_error, "forged or missing result"),
    (REPORT.replace("NONCE", "job['nonce']") + "os._exit(3)\n", Status.runtime_error,
     "exited with status 3 after writing its report"),
    ("import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", Status.runtime_error, "SIGSEGV"),
    ("import time\ntime.sleep(60)\n", Status.timeout, "timed out after 3 s"),
    ("raise ValueError('boom in the worker')\n", Status.runtime_error, "boom in the worker"),
])
def test_anything_else_is_a_value_not_an_exception(monkeypatch, relu, tmp_path, body, status, words):
    stand_in(monkeypatch, body)
    got = run(relu, tmp_path, timeout_s=3)
    assert not got.trusted and got.report.status == status
    assert words in got.report.message


def test_the_job_file_carries_the_contract(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "WorkerJob = None\nopen(out + '.job', 'w').write(json.dumps(job))\n"
             + REPORT.replace("NONCE", "job['nonce']"))
    seen = {}
    real = job_module.run_job

    def spy(job: WorkerJob, **kw):
        seen["job"], seen["kw"] = job, kw
        return real(job, **kw)
    monkeypatch.setattr(job_module, "run_job", spy)
    assert run(relu, tmp_path).trusted
    job, kw = seen["job"], seen["kw"]
    assert job.kind == "correct" and len(job.nonce) >= 24
    assert kw["env"]["HOME"] == job.scratch_dir and "SECRET" not in " ".join(kw["env"])
    assert kw["env"]["CUDA_VISIBLE_DEVICES"] == ""  # a cpp child sees no GPU
