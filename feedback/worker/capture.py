"""Capture what a build writes to file descriptors 1 and 2 (ninja, nvcc, the candidate's prints).

Why at the descriptor level: compilers run as subprocesses and C++ code writes to fd 1/2 directly,
so swapping `sys.stdout` alone would miss exactly the output that explains a failed build.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from feedback.worker.errors import bound


class Captured:
    """Text written during the `capture()` block, available after it ends."""

    text: str = ""


@contextlib.contextmanager
def capture(scratch_dir: str | Path) -> Iterator[Captured]:
    """Redirect fds 1 and 2 into a temporary file in `scratch_dir`; restore them afterwards."""
    result = Captured()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    streams = sys.stdout, sys.stderr
    with tempfile.TemporaryFile(dir=scratch_dir) as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        # Python-level writes too, in case sys.stdout is not fd 1 (a test runner's capture).
        text = io.TextIOWrapper(io.FileIO(os.dup(sink.fileno()), "w"), write_through=True)
        sys.stdout = sys.stderr = text
        try:
            yield result
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdout, sys.stderr = streams
            text.close()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            result.text = bound(sink.read().decode("utf-8", errors="replace"))
