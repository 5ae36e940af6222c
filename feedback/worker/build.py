"""The `build` job: import the candidate once, so that its extensions compile into the cache.

The compiler's own words are the most useful feedback a failed build has: torch puts ninja's and
the compiler's output into its "Error building extension" message, and everything written to file
descriptors 1/2 during the import (the candidate's prints, a verbose build) is captured too.
"""

from __future__ import annotations

from feedback.job import WorkerJob
from feedback.result import Status
from feedback.worker import audit
from feedback.worker.capture import capture
from feedback.worker.errors import JobFailure, bound
from feedback.worker.loading import import_candidate

WARNING_LIMIT = 4096


def run_build(job: WorkerJob) -> list[str]:
    """Import the candidate; returns warnings (the build's own output, bounded) or raises."""
    if not job.candidate_path:
        raise ValueError("a build job needs candidate_path")
    failure: JobFailure | None = None
    log = audit.install()
    log.watch(job.candidate_path)
    with capture(job.scratch_dir) as output:
        try:
            import_candidate(job.candidate_path)
        except JobFailure as exc:
            failure = exc
    log.retire()
    attempts = log.take()
    if attempts:
        failure = JobFailure(Status.guard_violation, "harness tampering while the candidate was "
                             f"imported: {'; '.join(attempts[:5])} (refused)")
    text = output.text.strip()
    if failure is not None:
        extra = f"\n--- output during the build ---\n{text}" if text else ""
        raise JobFailure(failure.status, bound(failure.message + extra))
    return [f"output during the build:\n{bound(text, WARNING_LIMIT)}"] if text else []
