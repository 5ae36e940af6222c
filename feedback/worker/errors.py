"""How child-side checks stop a job: one exception type carrying the report's status.

Why an exception rather than return codes: a check deep inside a trial (an aliased output, a
tampered `torch` function) must end the whole job at once with its own status, and every job kind
shares the same top-level handler that turns it into a `WorkerReport`.
"""

from __future__ import annotations

import traceback

from feedback.result import Correctness, Status

MESSAGE_LIMIT = 64 * 1024
"""Bound on raw message text; the parent's cleaner shortens further for the model."""


class JobFailure(Exception):
    """A job ends with `status` (not ok); `correctness` carries what was measured before it."""

    def __init__(self, status: Status, message: str, correctness: Correctness | None = None):
        super().__init__(message)
        self.status = status
        self.message = bound(message)
        self.correctness = correctness


def bound(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Keep the head and the tail: the exception line sits at the end, the context at the start."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - 60
    return f"{text[:head]}\n... [{len(text) - head - tail} characters cut] ...\n{text[-tail:]}"


def format_exception(exc: BaseException, what: str) -> str:
    """`what` plus the full traceback; the candidate's own frames are the innermost ones."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return bound(f"{what}\n{text}")


def candidate_error(exc: BaseException, what: str) -> JobFailure:
    """An exception raised while candidate code ran: runtime_error with the traceback.

    `SystemExit` is named explicitly: a candidate calling `sys.exit()` gets told so.
    """
    if isinstance(exc, SystemExit):
        return JobFailure(Status.runtime_error, f"{what}: the candidate called sys.exit({exc.code!r})")
    return JobFailure(Status.runtime_error, format_exception(exc, f"{what}:"))
