"""Faster `load_inline` / `load` builds of candidates, without changing what a candidate means.

A cold build of a typical candidate is mostly the compiler parsing torch's headers. Installed in
a trusted process before the candidate is imported, this module makes that build cheaper:

- a precompiled header (PCH) of `<torch/extension.h>` for each C++ translation unit that begins
  with that include (every load_inline `main.cpp` does), shared by all builds with the same
  flags (feedback/fastbuild_pch.py); the TU then reads exactly the same tokens, in the same order;
- `arch`: TORCH_CUDA_ARCH_LIST for CUDA sources (one arch instead of every visible GPU's, and a
  build at all where no GPU is visible); a candidate's own `-arch`/`-gencode` still wins, since
  torch ignores the list when `extra_cuda_cflags` name an arch;
- `jobs`: MAX_JOBS, ninja's parallelism (the host binding and the device code are separate
  ninja edges, so they compile side by side whenever MAX_JOBS >= 2);
- ccache, where one is available, pointed at the shared cache and told how to live with a PCH;
- `light_cuda`: nvcc's translation units read torch/types.h where they include torch/extension.h,
  and are built the stock way if that does not compile (feedback/fastbuild_light.py, which says
  what this could change in principle).
- `parallel_nvcc`: nvcc's steps for a `.cu`, with its host and device front ends (cudafe++,
  cicc) run side by side instead of one after the other (feedback/fastbuild_nvcc.py).

The hook sits on torch's `_write_ninja_file`, the one place where the exact flags of each TU are
known, so `load`, `load_inline` and any name the candidate imported them under all pass through
it. The candidate's flags are never removed or reordered; the PCH is appended as
`-include HEADER`. Anything unexpected (an unknown torch, a failed PCH) logs a warning and
builds exactly as stock torch would: the accelerator may cost speed, never a result.

Where builds run sandboxed, the cache is read-only to them: the trusted parent calls
`prepare(code, backend, cache_dir)` (feedback/fastbuild_prepare.py) before starting a build child,
and the child uses the PCHs that are ready; elsewhere a missing PCH is built on demand.

Every process that imports the same candidate must install the same settings: ninja rebuilds
whenever a command line changes, so a job that imported without the hook would rebuild. To keep
that true when a PCH appears between two jobs, the decision taken for a build directory is
recorded beside it (`kr_fastbuild.json`) and reused while the sources and flags are unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import json
import logging
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from feedback import fastbuild_light, fastbuild_nvcc, fastbuild_pch
from feedback.fastbuild_prepare import prepare

__all__ = ["FastBuild", "accelerated", "install", "prepare", "uninstall"]

log = logging.getLogger("feedback.fastbuild")

DECISION_FILE = "kr_fastbuild.json"
_FIRST_INCLUDE = re.compile(r"\A(?:\s|//[^\n]*\n|/\*.*?\*/)*#\s*include\s*<torch/extension\.h>",
                            re.DOTALL)


class FastBuild(BaseModel):
    """What the accelerator does; the defaults are what the evaluator uses."""

    model_config = ConfigDict(frozen=True)

    cache_dir: Path = Field(description="Shared cache; PCHs live in <cache_dir>/pch, ccache's "
                            "files in <cache_dir>/ccache.")
    pch: bool = Field(default=True, description="Use a PCH of <torch/extension.h> when one fits.")
    build_pch: bool = Field(default=True, description="Build a missing PCH here (under a lock). "
                            "A sandboxed child sees the cache read-only and only uses ready ones.")
    arch: str | None = Field(default=None, description="TORCH_CUDA_ARCH_LIST (e.g. `9.0`); None "
                             "keeps the environment's, else torch detects the visible GPUs.")
    jobs: int | None = Field(default=None, ge=1, description="MAX_JOBS for ninja; None keeps the "
                             "environment's (torch's default: cores + 2).")
    ccache: str = Field(default="auto", description="`auto` (use ccache when on PATH, as torch "
                        "does), `off`, or the path of a ccache binary to use.")
    light_cuda: bool = Field(default=True, description="CUDA sources that include "
                             "<torch/extension.h> read torch/types.h in its place, and are built "
                             "the stock way when that fails (feedback/fastbuild_light.py).")
    parallel_nvcc: bool = Field(default=True, description="nvcc's host and device front ends "
                                "run side by side (feedback/fastbuild_nvcc.py); the object file "
                                "is nvcc's.")

    @property
    def pch_root(self) -> Path:
        return Path(self.cache_dir) / "pch"


@dataclasses.dataclass
class _Installed:
    settings: FastBuild
    saved_env: dict[str, str | None]
    original: Callable[..., None]
    original_run: Callable[..., None]


_installed: _Installed | None = None


def install(cache_dir: Path | str, **settings: object) -> FastBuild | None:
    """Accelerate every later build in this process (the worker child calls this once).

    Keyword arguments are `FastBuild` fields. Installing again replaces the settings. Returns
    None, with a warning, when it cannot install (builds then stay stock); never raises.
    """
    global _installed
    try:
        from torch.utils import cpp_extension

        chosen = FastBuild(cache_dir=Path(cache_dir), **settings)
        uninstall()
        original, original_run = cpp_extension._write_ninja_file, cpp_extension._run_ninja_build
        _installed = _Installed(settings=chosen, saved_env=_apply_environment(chosen),
                                original=original, original_run=original_run)
        cpp_extension._write_ninja_file = _accelerated_write_ninja_file
        cpp_extension._run_ninja_build = _run_ninja_build
    except Exception as exc:  # noqa: BLE001 - an accelerator that cannot start leaves torch alone
        log.warning("fastbuild: not installed (%s: %s)", type(exc).__name__, exc)
        return None
    return chosen


def uninstall() -> None:
    """Restore torch's own function and the environment as they were before `install`."""
    global _installed
    if _installed is None:
        return
    from torch.utils import cpp_extension

    cpp_extension._write_ninja_file = _installed.original
    cpp_extension._run_ninja_build = _installed.original_run
    for name, value in _installed.saved_env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _installed = None


@contextlib.contextmanager
def accelerated(cache_dir: Path | str, **settings: object) -> Iterator[FastBuild | None]:
    """`install` for the duration of a block (benchmarks, tests, in-process builds)."""
    chosen = install(cache_dir, **settings)
    try:
        yield chosen
    finally:
        uninstall()


def _apply_environment(settings: FastBuild) -> dict[str, str | None]:
    """Set the variables torch and ccache read at build time; returns the old values."""
    wanted: dict[str, str] = {}
    if settings.arch:
        wanted["TORCH_CUDA_ARCH_LIST"] = settings.arch
    if settings.jobs:
        wanted["MAX_JOBS"] = str(settings.jobs)
    if settings.ccache == "off":
        wanted["TORCH_NO_COMPILER_WRAPPER"] = "1"
    else:
        wanted.update(_ccache_environment(settings))
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    return saved


def _ccache_environment(settings: FastBuild) -> dict[str, str]:
    """ccache settings for a shared, PCH-friendly cache; {} when no ccache will be used.

    torch wraps the compilers in the first `ccache` on PATH by itself; a given path is put first
    on PATH. The cache directory is only moved into the shared cache where it is writable (a
    ccache that cannot write its directory fails the compile).
    """
    env: dict[str, str] = {}
    if settings.ccache not in ("auto", "off"):
        binary = Path(settings.ccache)
        if not binary.is_file():
            log.warning("fastbuild: ccache %s not found; building without it", binary)
            return {}
        env["PATH"] = f"{binary.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    elif not shutil.which("ccache"):
        return {}
    env["CCACHE_SLOPPINESS"] = "pch_defines,time_macros,include_file_mtime,include_file_ctime"
    env["CCACHE_NOHASHDIR"] = "1"
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        env["CCACHE_BASEDIR"] = root  # same source in another build directory still hits
    directory = Path(settings.cache_dir) / "ccache"
    if _writable(directory):
        env["CCACHE_DIR"] = str(directory)
    return env


def _writable(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".probe{os.getpid()}"
        probe.write_text("")
        probe.unlink()
        return True
    except OSError:
        return False


def _accelerated_write_ninja_file(*args, **kwargs):
    """torch's `_write_ninja_file`, with the PCH added to the flags of eligible C++ TUs and the
    light headers to those of eligible CUDA TUs."""
    state = _installed
    original = state.original if state is not None else None
    if original is None:  # uninstalled while a reference to the wrapper was kept
        from torch.utils import cpp_extension
        original = cpp_extension._write_ninja_file
    try:
        bound = inspect.signature(original).bind(*args, **kwargs)
        extra = _pch_flags_for(bound.arguments, state.settings) if state is not None else []
        light = fastbuild_light.flags_for(bound.arguments) \
            if state is not None and state.settings.light_cuda else []
    except Exception as exc:  # noqa: BLE001 - the stock build must go on, whatever broke here
        log.warning("fastbuild: acceleration skipped (%s: %s)", type(exc).__name__, exc)
        return original(*args, **kwargs)
    for key, flags in (("post_cflags", extra), ("cuda_post_cflags", light)):
        if flags:
            bound.arguments[key] = list(bound.arguments.get(key) or []) + flags
    nvcc = None
    if state is not None and state.settings.parallel_nvcc and bound.arguments.get("with_cuda"):
        try:
            nvcc = fastbuild_nvcc.command_for(bound.arguments["path"])
        except Exception as exc:  # noqa: BLE001 - torch's own nvcc then
            log.warning("fastbuild: parallel nvcc skipped (%s: %s)", type(exc).__name__, exc)
    written = original(*bound.args, **bound.kwargs)
    if nvcc is not None:
        fastbuild_nvcc.use_in(bound.arguments["path"], nvcc)
    return written


def _run_ninja_build(build_directory: str, *args, **kwargs) -> None:
    """torch's `_run_ninja_build`; a light CUDA build that failed runs again the stock way."""
    state = _installed
    if state is None:  # uninstalled while a reference to the wrapper was kept
        from torch.utils import cpp_extension
        return cpp_extension._run_ninja_build(build_directory, *args, **kwargs)
    return fastbuild_light.run_with_fallback(state.original_run, build_directory, *args, **kwargs)


def _pch_flags_for(arguments: dict, settings: FastBuild) -> list[str]:
    """`["-include", HEADER]` when the C++ TUs of this build can use a PCH, else []."""
    from torch.utils import cpp_extension

    if not settings.pch:
        return []
    with_cuda = bool(arguments.get("with_cuda"))
    sources = [Path(s) for s in arguments["sources"]]
    cxx_sources = [s for s in sources if s.suffix not in (".sycl",)
                   and not (with_cuda and cpp_extension._is_cuda_file(str(s)))]
    if not cxx_sources or not all(_starts_with_torch_header(s) for s in cxx_sources):
        return []
    line = " ".join(f.strip() for f in (arguments.get("cflags") or []) +
                    (arguments.get("post_cflags") or []))
    flags = fastbuild_pch.pch_flags(line)
    if flags is None:
        return []
    cxx = cpp_extension.get_cxx_compiler()
    header = _decide(Path(arguments["path"]).parent, cxx, flags, cxx_sources, settings)
    return ["-include", shlex.quote(str(header))] if header else []


def _decide(build_dir: Path, cxx: str, flags: str, sources: list[Path],
            settings: FastBuild) -> Path | None:
    """The PCH header for this build directory, stable while its sources and flags are.

    A job that re-imports a built candidate must emit the same command lines as the job that
    built it, or ninja rebuilds: so an earlier decision (PCH or none) is kept while the
    fingerprint matches and its header still exists.
    """
    fingerprint = hashlib.sha256("\n".join(
        [cxx, flags, *(f"{s}:{hashlib.sha256(s.read_bytes()).hexdigest()}" for s in sources)]
    ).encode()).hexdigest()
    record = build_dir / DECISION_FILE
    with contextlib.suppress(OSError, ValueError):
        prior = json.loads(record.read_text())
        if prior.get("fingerprint") == fingerprint:
            kept = prior.get("pch")
            if kept is None or Path(kept).is_file():
                return Path(kept) if kept else None
    if settings.build_pch:
        header = fastbuild_pch.ensure_header(settings.pch_root, cxx, flags)
    else:
        key = fastbuild_pch.key_of(cxx, flags)
        header = fastbuild_pch.ready_header(settings.pch_root, key) if key else None
    with contextlib.suppress(OSError):
        record.write_text(json.dumps({"fingerprint": fingerprint,
                                      "pch": str(header) if header else None}))
    return header


def _starts_with_torch_header(source: Path) -> bool:
    """Whether the first directive of `source` is `#include <torch/extension.h>` (comments and
    blank lines aside): only then is `-include` of the PCH the same program."""
    try:
        head = source.read_text(errors="replace")[:65536]
    except OSError:
        return False
    return _FIRST_INCLUDE.match(head) is not None
