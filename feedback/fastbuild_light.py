"""The light nvcc translation unit: a CUDA source's `#include <torch/extension.h>` reads
torch/types.h only, and a source that does not compile so is built again the stock way.

Why: a cold CUDA build is mostly nvcc's three front ends (gcc -E, cudafe++, cicc, then the host
gcc) parsing torch's headers, and nvcc has no precompiled headers (docs/benchmarks.md, P1).
load_inline puts torch/types.h (ATen, the tensor API) first in every CUDA source; candidates
add torch/extension.h out of habit, which brings torch/all.h (the C++ frontend) and
torch/python.h (pybind11, Python.h) that a kernel and its host wrapper do not use. Measured on
the 2-core CPU machine, nvcc on a typical ReLU candidate's `cuda.cu` (torch's flags, sm_90):
120 CPU s stock, 55 CPU s light.

How: the folder `light_headers/` (its `torch/extension.h` includes torch/types.h) goes on the
nvcc command line as `-I`, searched before torch's own `-isystem` folders, for the CUDA sources
of a build that include `<torch/extension.h>`; the C++ sources (main.cpp, the bindings) keep the
real header and their PCH. If the build fails, the flag is taken out of `build.ninja` and the
build runs again: its error, if any, is the stock build's, word for word. The choice is recorded
beside the build (`kr_fastbuild_cuda.json`) and kept while the CUDA sources and flags are
unchanged, so a job that imports the built candidate emits the same command lines (ninja would
rebuild otherwise), and a source that failed light is not tried light again.

What a light build cannot change: the types and the functions a host wrapper uses come from the
same torch headers either way, and the kernels need none of them. What it could in principle: a
TU that compiles either way but resolves an unqualified call to another overload because one was
declared only in the left-out headers, or a source that clashes with a name those headers declare
and so builds light but not stock. `FastBuild(light_cuda=False)` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import shlex
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("feedback.fastbuild")

SHIM = Path(__file__).resolve().parent / "light_headers"
RECORD = "kr_fastbuild_cuda.json"
_INCLUDES_EXTENSION = re.compile(r"^\s*#\s*include\s*[<\"]torch/extension\.h[>\"]", re.MULTILINE)


def flag() -> list[str]:
    return ["-I", shlex.quote(str(SHIM))]


def flags_for(arguments: dict) -> list[str]:
    """`-I light_headers` for this build's nvcc command lines, or [] (no CUDA source includes
    torch/extension.h, or the sources failed light before)."""
    from torch.utils import cpp_extension

    if not arguments.get("with_cuda"):
        return []
    sources = [Path(s) for s in arguments["sources"] if cpp_extension._is_cuda_file(str(s))]
    texts = [s.read_text(errors="replace") for s in sources if s.is_file()]  # a dry run has none
    if not any(_INCLUDES_EXTENSION.search(t) for t in texts):
        return []
    flags = [*(arguments.get("cuda_cflags") or []), "|", *(arguments.get("cuda_post_cflags") or [])]
    fingerprint = hashlib.sha256("\n".join([*flags, *texts]).encode()).hexdigest()
    record = Path(arguments["path"]).parent / RECORD
    with contextlib.suppress(OSError, ValueError):
        prior = json.loads(record.read_text())
        if prior.get("fingerprint") == fingerprint:
            return flag() if prior.get("light") else []
    ninja = Path(arguments["path"])
    if not record.exists() and ninja.is_file() and " ".join(flag()) not in ninja.read_text():
        # built here before light builds existed (a cache of an earlier version): keep its
        # command lines, or ninja would rebuild it inside the next job that imports it
        _record(record, fingerprint, False)
        return []
    _record(record, fingerprint, True)
    return flag()


def run_with_fallback(original: Callable[..., None], build_directory: str, *args, **kwargs) -> None:
    """torch's `_run_ninja_build`; when a light build fails, the stock build of the same sources."""
    try:
        return original(build_directory, *args, **kwargs)
    except RuntimeError:
        ninja = Path(build_directory) / "build.ninja"
        text = ninja.read_text() if ninja.is_file() else ""
        light = " " + " ".join(flag())
        if light not in text:
            raise
    log.info("fastbuild: the light CUDA build failed in %s; building it the stock way",
             build_directory)
    ninja.write_text(text.replace(light, ""))
    record = Path(build_directory) / RECORD
    with contextlib.suppress(OSError, ValueError):
        _record(record, json.loads(record.read_text()).get("fingerprint"), False)
    return original(build_directory, *args, **kwargs)


def chose(build_directory: Path) -> bool | None:
    """Whether this build's CUDA sources were built light, from its record (None: none)."""
    with contextlib.suppress(OSError, ValueError):
        return bool(json.loads((Path(build_directory) / RECORD).read_text()).get("light"))
    return None


def went_light(extensions_dir: Path) -> bool | None:
    """Whether the CUDA builds under `extensions_dir` were built light (False: one was built
    stock after its light build failed; None: none was a candidate for it)."""
    chosen = [c for r in Path(extensions_dir).glob(f"*/{RECORD}")
              if (c := chose(r.parent)) is not None]
    return all(chosen) if chosen else None


def _record(path: Path, fingerprint: str | None, light: bool) -> None:
    with contextlib.suppress(OSError):
        path.write_text(json.dumps({"fingerprint": fingerprint, "light": light}))
