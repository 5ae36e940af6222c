"""The byte-code folder: written by the trusted warm-up, read (never written) by every job."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch
from test_job import stand_in

import feedback.worker.run as worker_run
from feedback import bytecode
from feedback.job import launch
from feedback.options import EvalOptions
from feedback.sandbox import isolation_available


def compiled_path(source: str, prefix: Path) -> Path:
    """Where Python looks for `source`'s byte-code under `prefix` (PYTHONPYCACHEPREFIX)."""
    saved = sys.pycache_prefix
    sys.pycache_prefix = str(prefix)
    try:
        return Path(importlib.util.cache_from_source(source))
    finally:
        sys.pycache_prefix = saved


def job(relu, tmp_path):
    return launch("correct", relu, "cpp", EvalOptions(cache_dir=tmp_path / "cache"),
                  candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=None,
                  timeout_s=20)


@pytest.mark.slow
def test_the_warm_up_compiles_what_a_worker_imports_once(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(bytecode, "_STARTED", set())
    prefix = bytecode.folder()
    assert prefix == (tmp_path / ".cache" / "kernel-refine-bytecode").resolve()
    bytecode.warm(prefix).join()
    for module in (torch, worker_run):  # torch's modules and the worker's own
        assert compiled_path(module.__file__, prefix).is_file(), module.__name__
    assert bytecode.warm(prefix) is None  # once per process
    monkeypatch.setattr(bytecode, "_STARTED", set())  # another process: the marker says done
    assert bytecode.marker(prefix).exists() and bytecode.warm(prefix) is None


def test_the_marker_changes_with_the_projects_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    prefix = bytecode.folder()
    before = bytecode.marker(prefix)
    source = Path(worker_run.__file__)
    stat = source.stat()
    try:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 86400 * 10**9))  # newer than any
        assert bytecode.marker(prefix) != before
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert bytecode.marker(prefix) == before


def test_a_job_reads_the_folder_and_writes_no_byte_code(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "send(report(message=f'{sys.pycache_prefix}|{sys.dont_write_bytecode}'))\n")
    got = job(relu, tmp_path)
    assert got.trusted and got.report.message == f"{bytecode.folder()}|True"


@pytest.mark.skipif("mounts" not in isolation_available(), reason="no mount namespace here")
def test_a_job_cannot_write_into_the_folder(monkeypatch, relu, tmp_path):
    """A candidate's byte-code there would run in every later job, a baseline's included."""
    stand_in(monkeypatch, "try:\n"
                          "    open(os.path.join(sys.pycache_prefix, 'planted.pyc'), 'w')\n"
                          "    said = 'written'\n"
                          "except OSError as exc:\n"
                          "    said = exc.strerror\n"
                          "send(report(message=said))\n")
    got = job(relu, tmp_path)
    assert got.trusted and got.report.message == "Read-only file system"
    assert not (bytecode.folder() / "planted.pyc").exists()
