"""feedback/worker/handoff.py with the real worker (cpp: the host's CPU is the device): a
time job started ahead (`standby_workers`) prepares holding the device's lock shared and holds
it alone for its timed part; a candidate's imports the candidate only once it holds it alone."""

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


def test_a_reference_is_delivered_before_the_device_is_held(relu, fast_options, holds):
    """Its set-up that needs no device (torch.compile's imports, for the compiled role) runs
    while another job holds the device: it waits for the lock only once that is done, in its
    `shared_wait` phase."""
    import threading
    import time

    from feedback.cache import locked
    from feedback.evaluate import device_lock

    options = fast_options.model_copy(update={"timing_trials": 5})
    held, busy = threading.Event(), 3.0

    def other_job():
        with locked(device_lock(options, gpu=False)):
            held.set()
            time.sleep(busy)

    with job.standby_workers(cpu=True):
        _run("time", "eager", relu, "cpp", options, None)  # starts the standby worker
        thread = threading.Thread(target=other_job)
        thread.start()
        held.wait()
        run = _run("time", "eager", relu, "cpp", options, None)
        thread.join()
    assert run.trusted and run.report.status == Status.ok, run.report.message
    assert run.report.phases["shared_wait"] > busy / 2
    assert [h["shared"] for h in holds[-2:]] == [True, False]


def test_a_candidate_is_imported_only_once_its_time_job_holds_the_device_alone(
        relu, fast_options, holds):
    """Its trusted set-up holds the device shared; the candidate's import (here a second's
    sleep) falls in its hold alone, so no candidate code runs while it waits between the two."""
    from candidates import cpp_candidate

    from feedback.compile import locate
    from feedback.evaluate import LocalEvaluator

    options = fast_options.model_copy(update={"timing_trials": 5})
    code = cpp_candidate("relu", extra="\nimport time as _t\n_t.sleep(1.5)\n")
    built = LocalEvaluator().compile(relu, code, "cpp", options)
    assert built.status == Status.ok, built.message
    paths = locate(code, "cpp", options)
    with job.standby_workers(cpu=True):
        _run("correct", "candidate", relu, "cpp", options, paths)  # starts a standby worker
        before = len(holds)
        run = _run("time", "candidate", relu, "cpp", options, paths)
    assert run.trusted and run.report.status == Status.ok, run.report.message
    shared, alone = holds[before:]
    assert shared["shared"] and not alone["shared"] and shared["left"] <= alone["got"]
    assert shared["left"] - shared["got"] < 1.5 <= run.report.phases["load"]
    assert alone["left"] - alone["got"] >= run.report.phases["load"]
