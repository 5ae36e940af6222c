"""feedback/worker/handoff.py with the real worker (cpp: the host's CPU is the device): a
reference's time job started ahead (`standby_workers`) prepares holding the device's lock shared
and holds it alone for its timed part; a candidate's holds it alone throughout."""

from __future__ import annotations

from feedback import job
from feedback.evaluate import _run
from feedback.result import Status


def test_a_reference_prepares_shared_and_times_alone(relu, fast_options, holds):
    options = fast_options.model_copy(update={"timing_trials": 5})
    with job.standby_workers(cpu=True):
        first = _run("time", "eager", relu, "cpp", options, None)  # starts its own worker
        served = job.standby_served()
        second = _run("time", "eager", relu, "cpp", options, None)  # the standby one
    assert job.standby_served() == served + 1
    for run in (first, second):
        assert run.trusted and run.report.status == Status.ok, run.report.message
        assert run.report.timing is not None and run.report.timing.median_ms > 0
    assert [h["shared"] for h in holds] == [False, True, False]
    assert holds[1]["left"] <= holds[2]["got"]
