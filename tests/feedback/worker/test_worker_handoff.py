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
