"""A candidate's device work after its forward() returned has a limit of its own
(feedback/worker/devices.py, `device_wait_limit`): a kernel that never ends costs seconds of the
device, not the job's whole run limit. The watchdog runs in processes of its own here (it ends
the process it runs in); its GPU use is in tests/feedback/test_gpu.py (the `hang` cases)."""

from __future__ import annotations

import subprocess
import sys
import time

from workerkit import REPO

from feedback.job import DEVICE_WAIT_EXIT, _failure_report
from feedback.result import Status
from feedback.sandbox import ChildOutcome
from feedback.worker import devices
from feedback.worker.harness import Harness, device_wait_s

SCRIPT = """
import threading, time
from feedback.worker import devices
devices.enforce_device_waits({on})
before = threading.active_count()
with devices.device_wait_limit({limit}):
    time.sleep({sleep})
print("finished", before == threading.active_count())
"""


def run(on: bool, limit: float | None, sleep: float) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(on=on, limit=limit, sleep=sleep)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    return proc, time.monotonic() - start


def test_device_work_past_its_limit_ends_the_worker_as_hung():
    proc, wall = run(True, 0.5, 30)
    assert proc.returncode == DEVICE_WAIT_EXIT, proc.stderr
    assert "did not finish within 0.5 s after its forward() returned" in proc.stderr
    assert "finished" not in proc.stdout
    assert wall < 20  # the sleep was 30 s: the watchdog ended it


def test_device_work_within_its_limit_leaves_no_thread_behind():
    proc, _ = run(True, 5, 0.2)
    assert proc.returncode == 0 and proc.stdout.split() == ["finished", "True"], proc.stderr


def test_in_process_jobs_and_no_limit_are_not_cut():
    for on, limit in ((False, 0.2), (True, None)):
        proc, _ = run(on, limit, 1.0)
        assert proc.returncode == 0 and "finished" in proc.stdout, (on, limit, proc.stderr)


def test_the_parent_reports_that_exit_as_a_time_out(kit):
    said = "the candidate's device work did not finish within 10 s after its forward() returned"
    outcome = ChildOutcome(returncode=DEVICE_WAIT_EXIT, stderr_tail=said, wall_s=12.0)
    report = _failure_report(kit.job("correct", "x", None), outcome, 120, None, False)
    assert report.status == Status.timeout
    assert report.message.startswith("the correctness run timed out waiting for the device")
    assert said in report.message
    build = _failure_report(kit.job("build", "x", None), outcome, 120, None, False)
    assert build.status == Status.runtime_error and "exited with status 3" in build.message
    own = outcome.model_copy(update={"stderr_tail": "bye"})  # a candidate's own os._exit(3)
    mine = _failure_report(kit.job("correct", "x", None), own, 120, None, False)
    assert mine.status == Status.runtime_error and "exited with status 3" in mine.message


def test_the_limit_grows_with_a_slow_reference():
    h = Harness.__new__(Harness)
    h.reference_s = 0.001
    assert device_wait_s(h) == devices.DEVICE_WAIT_S
    h.reference_s = 0.5
    assert device_wait_s(h) == 0.5 * devices.DEVICE_WAIT_FACTOR
