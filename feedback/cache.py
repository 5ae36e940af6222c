"""The on-disk cache: candidate builds, shared extension directories, reference timings.

Layout under `options.cache_dir`:

    build/<key>/candidate.py   the candidate's own file (it is imported from here, never exec'd
                               into another namespace); key = sha256(source, backend, toolchain,
                               arch, harness version)
    build/<key>/outcome.json   written once a build finished: success or a deterministic failure,
                               so an unchanged source is never built (or failed) twice
    ext/<ext_key>/             TORCH_EXTENSIONS_DIR / TRITON_CACHE_DIR, keyed by the extension
                               sources only: candidates that differ in Python alone share a build
    reference/<key>.json       eager / torch.compile timings of a problem on one device
    inductor/                  torch.compile's own cache for the baselines

Writers are safe against each other: files are written to a temporary name and renamed, and a
build holds an exclusive `fcntl` lock (released by the kernel if the holder dies).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from problems.module import parse_python

SOURCE_MARKERS = ("#include", "__global__", "PYBIND11", "TORCH_LIBRARY", "torch::", "at::Tensor")


def digest(*parts: Any) -> str:
    """sha256 of the JSON of `parts` (stable key material)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def build_key(code: str, backend: str, toolchain: dict[str, Any], arch: str | None) -> str:
    """One candidate build: the whole source, backend, toolchain, GPU architecture, and the
    harness that judged it (a fixed harness must not keep replaying its old verdicts; the
    extension directory is keyed without it, so re-judging costs an import, not a compile)."""
    return digest("build", code_hash(code), backend, toolchain, arch, harness_version())[:32]


def extension_material(code: str) -> list[str] | None:
    """What a load_inline build depends on: the text of every build call and every string that
    looks like C++/CUDA source or a compiler flag. None when no build call is found (then the
    whole file is the key). Python-only edits (the ModelNew wrapper) leave it unchanged."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return None
    calls = [ast.get_source_segment(code, n) or "" for n in ast.walk(tree)
             if isinstance(n, ast.Call) and (getattr(n.func, "attr", None) or
                                             getattr(n.func, "id", None)) in ("load_inline", "load")]
    if not calls:
        return None
    strings = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str)
                      and (n.value.startswith("-") or any(m in n.value for m in SOURCE_MARKERS))})
    return calls + strings


def extension_key(code: str, backend: str, toolchain: dict[str, Any], arch: str | None) -> str:
    material = extension_material(code)
    return digest("ext", material if material is not None else code_hash(code), backend,
                  toolchain, arch)[:32]


def write_atomic(path: Path, text: str) -> None:
    """Write by rename so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(path: Path, shared: bool = False) -> Iterator[None]:
    """Hold an advisory lock on `path` (created if needed) for the block: exclusive, or `shared`
    with other shared holders (never with an exclusive one). Threads and processes count alike:
    each call opens the file anew. An exclusive waiter goes first: it holds the lock's gate
    (`PATH.gate`, beside it) until it has the lock, and every caller passes that gate before it
    asks (flock alone lets overlapping shared holders keep an exclusive one waiting for as long as
    they keep coming: on the H200, with seven other test processes' correctness jobs on the
    device, the timings of a test process waited 33-52 s each)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh, path.with_name(path.name + ".gate").open("a") as gate:
        fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
        try:
            if not shared:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        finally:
            fcntl.flock(gate.fileno(), fcntl.LOCK_UN)
        if shared:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def read_record(path: Path, model: type[BaseModel]) -> Any | None:
    """A cached record, or None when absent or unreadable (a corrupt entry is a miss)."""
    try:
        return model.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None


def write_record(path: Path, record: BaseModel) -> None:
    write_atomic(path, record.model_dump_json(indent=1))


_SIGNATURES: dict[str, str] = {}


def problem_identity(problem: Any, size: str | None) -> tuple:
    """What a measurement of `problem` at `size` depends on: its id, source, the size's name and
    what that name means (a record's `sizes` can give one name other constants than its source
    does, as the timing bench's `bench` preset does for each kernel)."""
    return (problem.id, code_hash(problem.source), size,
            (getattr(problem, "sizes", None) or {}).get(size) if size else None)


def _input_signature(problem: Any, size: str | None) -> str:
    """`f32[4096, 4096], ...`: the inputs' dtypes and shapes (the source hash implies them for a
    given size; spelled out so the key says what it measured). `?` when they cannot be listed.
    Remembered per `problem_identity`: listing them loads the problem's module."""
    from problems.inputs import describe_inputs

    key = digest(*problem_identity(problem, size))
    if key not in _SIGNATURES:
        try:
            _SIGNATURES[key] = ", ".join(describe_inputs(problem, size))
        except Exception:  # noqa: BLE001 - the worker reports a broken problem; key stays usable
            _SIGNATURES[key] = "?"
    return _SIGNATURES[key]


def harness_version() -> str:
    """Hash of the worker's source: cached timings are void once the way of measuring changes."""
    files = sorted((Path(__file__).parent / "worker").glob("*.py"))
    return digest(*[(f.name, f.read_text()) for f in files])[:16]


def reference_path(options: Any, problem: Any, kind: str, role: str, backend: str,
                   device_name: str | None) -> Path | None:
    """Where the timing (or profile) of a reference program lives: per problem and its source,
    size, input dtypes and shapes, device, torch, harness version and timing knobs. None when the
    device is unknown."""
    if not device_name:
        return None
    import torch

    key = digest("reference", kind, role, *problem_identity(problem, options.size),
                 _input_signature(problem, options.size),
                 backend == "cpp", device_name, torch.__version__, harness_version(),
                 options.timing_trials, options.warmup, options.input_sets, options.settle_ms,
                 options.cpu_threads, options.compile_mode if role == "compiled" else "",
                 options.timing_max_trials, options.timing_se, options.timing_budget_s,
                 options.interval_ms, options.max_calls_per_interval, options.warmup_s,
                 options.warmup_window, options.isolate_cores, options.flush_ahead,
                 options.wake_after_wait, options.trusted_lead)
    return Path(options.cache_dir) / "reference" / f"{key[:32]}.json"
