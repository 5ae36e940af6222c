"""The child side of the evaluator: `python -m feedback.worker JOB.json`.

One process runs one `WorkerJob` (feedback/job.py) and writes one `WorkerReport` to
`job.result_path`. Job kinds: `build` (build.py), `correct` (correct.py), `time` (timing.py,
clocks.py, cost.py), `profile` (profiling.py). Shared trusted set-up and the guarded candidate call
live in harness.py; the anti-cheat checks in guards.py and tamper.py; the tolerance policies in
tolerance.py; cache locations in caches.py.
"""

__all__ = ["run_job"]


def __getattr__(name: str):
    if name == "run_job":
        from feedback.worker.run import run_job

        return run_job
    raise AttributeError(name)
