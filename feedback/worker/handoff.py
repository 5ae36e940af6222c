"""The point in a time job from which it needs the device to itself.

A standby worker is started with two pipes besides its channel (feedback/job.py, `_Standby`): it
writes `READY` on its signal pipe once its imports are done; asked with `CONTEXT` on its go pipe
before its job arrives (a GPU job's parent asks, then waits), it makes its CUDA context and
answers `CONTEXT` (__main__.py), so no job holds the device while that is made. A time job
(`prepares_shared`) is then delivered without the device's lock: it does what needs no device
(torch.compile's imports and build), writes `SHARED` and waits for the parent's byte on the go
pipe, which comes once the parent holds the lock shared; it prepares so (problem, reference,
CUDA, torch.compile's compile) and, just before its timed part, writes `PREPARED` and waits for
the next byte, which comes once the parent holds the lock alone. A candidate's time job imports
the candidate only after that byte: until the device is its own, no candidate code runs in its
process (so none can run beside another job's timing while it waits).
Any other job has both pipes closed before it starts. Without the pipes (a job run in-process, a
worker started without standby) `shared` and `exclusive` return at once: that job holds the device
alone throughout.
"""

from __future__ import annotations

import os
import sys

from feedback.job import PREPARED, SHARED, prepares_shared

_PIPES: list[tuple[int, int]] = []


def attach(raw: dict, signal_fd: int, go_fd: int) -> None:
    """Keep the pipes for a `prepares_shared` job (`raw`: the job as read); close them for any
    other."""
    mode = (raw.get("options") or {}).get("compile_mode", "default")
    if prepares_shared(raw.get("kind") or "", raw.get("role") or "candidate", str(mode)):
        _PIPES.append((signal_fd, go_fd))
        return
    for fd in (signal_fd, go_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def shared() -> None:
    """Block until the parent holds the device shared for this job (at once without the pipes)."""
    if _PIPES:
        _ask(*_PIPES[-1], SHARED)


def exclusive() -> None:
    """Block until the parent holds the device alone for this job (at once without the pipes).
    While it waits, it holds no device memory that its set-up freed: the allocator's cached blocks
    go back to the device first, so the jobs that run meanwhile (correctness jobs, a job run
    alone after it ran short of memory) have them. On the H100 (80 GB), run 53: prepared time
    jobs held 10-26 GB each while waiting, and the jobs beside them ran out of memory."""
    if not _PIPES:
        return
    release_cached_memory()
    signal_fd, go_fd = _PIPES.pop()
    try:
        _ask(signal_fd, go_fd, PREPARED)
    finally:
        for fd in (signal_fd, go_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def release_cached_memory() -> None:
    """Return the CUDA caching allocator's unused blocks to the device (nothing where CUDA was
    never initialised in this process: the cpp backend)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _ask(signal_fd: int, go_fd: int, word: bytes) -> None:
    """Say `word` to the parent and wait for its byte on the go pipe."""
    try:
        os.write(signal_fd, word)
        os.read(go_fd, 1)  # b"" when the parent is gone: then no one reads the report either
    except OSError:
        pass
