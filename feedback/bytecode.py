"""Byte-code of what workers import, written by one trusted child and only read by workers.

Workers run with PYTHONDONTWRITEBYTECODE: nothing a candidate's process writes may be loaded by
another job. Where the installed packages carry no byte-code of their own, every worker compiled
what it imports from source: the GPU hosts' torch has no `.pyc` file for any of its 2,141
modules (H100, run 85), and a worker's imports (torch, the worker's modules, torch.compile's for a
baseline) took 4.5-5.1 CPU s a process there, about 170 processes in a framework arm of 41
candidates. Compiled once into a folder of their own they took 3.7 CPU s against 5.4 (H100
host, run 86's import probe).

`folder()` is that folder (`PYTHONPYCACHEPREFIX` of every worker, bound read-only in its mount
namespace like the cache: job.launch). `warm()` starts, once per process and only where no
earlier warm-up of the same sources finished (`marker`), a child that imports what a worker
imports with the folder as its prefix and writing allowed, in a thread of its own: jobs that
start before it is done compile from source as before. Byte-code of a source that changed since
is stale and ignored (Python checks each source's time and size); the project's sources name the
marker, so an edit there brings a new warm-up.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from feedback.environment import child_env
from feedback.sandbox import run_child

IMPORTS = ("feedback.worker.channel", "feedback.worker.caches", "feedback.worker.run",
           "feedback.worker.build", "feedback.worker.profiling", "feedback.worker.handoff",
           "torch.profiler", "triton.language")
"""What the warm-up imports besides `run.import_ahead` (with torch.compile's modules)."""

WARM = ("import importlib\n"
        "from feedback.worker.run import import_ahead\n"
        "import_ahead()\n"
        f"for name in {IMPORTS!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        pass\n")

WARM_TIMEOUT_S = 300.0

_STARTED: set[Path] = set()
_LOCK = threading.Lock()


def folder() -> Path | None:
    """`~/.cache/kernel-refine-bytecode`, made if missing; None where it cannot be made (then
    workers go without, as before)."""
    path = Path.home() / ".cache" / "kernel-refine-bytecode"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path.resolve()


def warm(prefix: Path, cpus: Sequence[int] | None = None) -> threading.Thread | None:
    """Start the warm-up for `prefix` unless this process did already or a finished one left
    the marker of these sources (`marker`), on CPU cores `cpus` (off the devices' timing cores,
    as every child); the thread that waits for it (None when none was started)."""
    with _LOCK:
        if prefix in _STARTED:
            return None
        _STARTED.add(prefix)
    done = marker(prefix)
    if done.exists():
        return None
    thread = threading.Thread(target=_write, args=(prefix, cpus, done), name="bytecode-warm-up",
                              daemon=True)
    thread.start()
    return thread


def marker(prefix: Path) -> Path:
    """The file a warm-up leaves in `prefix` when it ends well: named by the interpreter, torch's
    version, the workers' import path and the newest of the project's sources, so a process that
    would import nothing new starts none (each costs a process's imports: a CLI call, each Ray
    actor and each test process start one)."""
    import torch

    from feedback.cache import digest
    from feedback.environment import REPO_ROOT

    newest = max((f.stat().st_mtime_ns for d in ("feedback", "problems")
                  for f in (REPO_ROOT / d).rglob("*.py")), default=0)
    env = child_env(scratch=prefix, extensions_dir=None, gpu_index=None, arch=None, threads=1)
    key = digest(sys.executable, sys.version, torch.__version__, env["PYTHONPATH"], newest)
    return prefix / f".warm-{key[:24]}"


def _write(prefix: Path, cpus: Sequence[int] | None, done: Path) -> None:
    from feedback.job import AHEAD_ENV  # job.py starts the warm-up

    scratch = Path(tempfile.mkdtemp(prefix="kr-bytecode-"))
    try:
        env = child_env(scratch=scratch, extensions_dir=None, gpu_index=None, arch=None,
                        threads=1, extra={"PYTHONPYCACHEPREFIX": str(prefix), AHEAD_ENV: "compile"})
        env.pop("PYTHONDONTWRITEBYTECODE")
        if run_child([sys.executable, "-c", WARM], cwd=scratch, env=env,
                     timeout_s=WARM_TIMEOUT_S, isolate=False, cpus=cpus).ok:
            done.touch()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
