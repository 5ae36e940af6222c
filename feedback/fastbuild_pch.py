"""A shared precompiled header (PCH) of `<torch/extension.h>`, one per exact compiler flag set.

Why: parsing torch's headers is most of a `load_inline` build (a one-function C++ extension:
27 s stock, 10.6 s with this PCH on two cores). GCC only uses a PCH when the flags that shape the
header agree with the ones it was built with (-O level, -D macros it reads, -std, -m...), so the
PCH is keyed by the exact flags torch passes for the translation unit (minus the per-extension
`-DTORCH_EXTENSION_NAME`, which torch's headers never read; the probe below proves that for every
PCH) plus the compiler's identity. GCC silently compiles the header text instead when it cannot
use the PCH, so a stale or mismatched PCH costs speed, never correctness.

Layout: `<root>/<key>/kr_pch.h` (`#include <torch/extension.h>`), `kr_pch.h.gch`, `flags.txt`
(the flags, as keyed), `command.txt` (the command that built it), and `ready`, or `failed` (why;
retried after an hour). Builders hold an `fcntl` lock on `<root>/<key>.lock` and rename the
finished `.gch` into place, so concurrent builders never see half a PCH, and a builder killed
halfway leaves only a temporary file that the next one removes.

A PCH of torch's headers is about 800 MB, and each new flag set makes another, so a root keeps at
most `KERNEL_REFINE_PCH_KEEP` (default 4) of them, plus one for each other flag set being built at
the same moment: before building one more, the least recently used are evicted (their `ready`,
then their `.gch`; the small `kr_pch.h` stays). Evicting is always safe: a build that already
names an evicted header in its `-include` still compiles, GCC then reads the header's text
(slower, same program), and the flag set's PCH is built again when it is next asked for.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import shlex
import tempfile
import time
from pathlib import Path

from feedback.cache import locked, write_atomic

log = logging.getLogger("feedback.fastbuild")

HEADER = "kr_pch.h"
FORMAT = "kr-pch-1"  # bump when the layout or the header text changes
BUILD_TIMEOUT_S = 600.0
FAILED_RETRY_S = 3600.0
KEEP_ENV = "KERNEL_REFINE_PCH_KEEP"
DEFAULT_KEEP = 4
# Flags after which a TU is no longer a plain compile of the source: a PCH would be wrong or moot.
_UNSAFE = re.compile(r"^-(include|imacros|x|E$|S$|save-temps|fpreprocessed|fno-pch|H$|M)")
_OTHER_INCLUDES = re.compile(r"^-(I|iquote|idirafter|iprefix|iwithprefix|isysroot|-sysroot|nostdinc)")
# Characters the shell that runs ninja's commands would expand; such flags are left alone.
_SHELL_META = re.compile(r"[$`*?\[\]{}~;&|<>()!\\]")


@functools.cache
def compiler_identity(cxx: str) -> str | None:
    """`cxx -v` output of a GCC (the PCH format belongs to one compiler build), else None."""
    try:
        argv = [*shlex.split(cxx), "-v"]
    except ValueError:
        return None
    ok, text = _run(argv)
    return text if ok and "gcc version" in text and "COLLECT_GCC" in text else None


def pch_flags(cflags: str) -> str | None:
    """The flags a PCH for a TU compiled with `cflags` (torch's `$cflags $post_cflags` line)
    must be built with, or None when such a TU is not eligible for one.

    Include directories other than torch's and Python's make a TU ineligible: GCC does not check
    whether a header changed since the PCH was built, and a candidate's own folders may change.
    """
    flags = " ".join(w for w in cflags.split() if not w.startswith("-DTORCH_EXTENSION_NAME="))
    if _SHELL_META.search(flags):
        return None
    try:
        words = shlex.split(flags)
    except ValueError:  # unbalanced quotes: let the stock build report it
        return None
    if any(_UNSAFE.match(w) or _OTHER_INCLUDES.match(w) for w in words):
        return None
    systems = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-isystem"]
    return flags if set(systems) <= _torch_includes() else None


@functools.cache
def _torch_includes() -> frozenset[str]:
    """The -isystem folders torch itself adds (torch, its C++ API, CUDA, Python)."""
    import sysconfig

    from torch.utils import cpp_extension

    found = set(cpp_extension.include_paths("cpu"))
    with contextlib.suppress(Exception):  # no CUDA toolkit: the CPU folders only
        found |= set(cpp_extension.include_paths("cuda"))
    found.add(sysconfig.get_path("include", scheme="posix_prefix"))
    return frozenset(found)


def key_of(cxx: str, flags: str) -> str | None:
    """Cache key of the PCH for these flags, or None when `cxx` is not GCC."""
    identity = compiler_identity(cxx)
    if identity is None:
        return None
    return hashlib.sha256(f"{FORMAT}\n{cxx}\n{identity}\n{flags}".encode()).hexdigest()[:24]


def ready_header(root: Path, key: str) -> Path | None:
    """The header to `-include` when its PCH is built and probed, else None (no locking)."""
    directory = Path(root) / key
    return directory / HEADER if (directory / "ready").exists() else None


def ensure_header(root: Path, cxx: str, flags: str) -> Path | None:
    """The PCH header for `flags`, building it now (under the lock) when missing.

    Returns None when the PCH cannot be had: not GCC, a build failed within the hour (recorded
    in `failed`), the directory is not writable (a sandboxed child sees the cache read-only), or
    this build or its probe failed. Never raises for those; the caller builds without it.
    """
    key = key_of(cxx, flags)
    if key is None:
        return None
    header = ready_header(root, key)
    if header is not None:
        _mark_used(header)
        return header
    directory = Path(root) / key
    if _recent_failure(directory):
        return None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with locked(Path(root) / f"{key}.lock"):
            header = ready_header(root, key)  # built by a concurrent builder while we waited
            if header is None and not _recent_failure(directory):
                _make_room(Path(root), besides=key)
                header = _build(directory, cxx, flags)
    except OSError as exc:
        log.debug("fastbuild: no precompiled header (%s)", exc)
        return None
    return header


def keep() -> int:
    """How many PCHs a root keeps: `KERNEL_REFINE_PCH_KEEP`, else DEFAULT_KEEP.

    Raises ValueError, naming the variable, for anything but a whole number >= 1."""
    text = os.environ.get(KEEP_ENV, "").strip()
    if not text:
        return DEFAULT_KEEP
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{KEEP_ENV}={text!r}: expected a whole number >= 1 (PCHs kept per cache)")
    return int(text)


def _mark_used(header: Path) -> None:
    """Record a use of a ready PCH (its `ready` file's mtime): eviction takes the oldest first.
    A read-only cache (a sandboxed child) records nothing."""
    with contextlib.suppress(OSError):
        os.utime(header.parent / "ready")


def _make_room(root: Path, besides: str) -> None:
    """Before `besides` is built: evict the least recently used other ready PCHs of `root`, so
    that with it the root holds `keep()`."""
    limit = keep()
    used = []
    for ready in root.glob("*/ready"):
        with contextlib.suppress(OSError):
            if ready.parent.name != besides:
                used.append((ready.stat().st_mtime, ready))
    for _, ready in sorted(used)[:max(0, len(used) - (limit - 1))]:
        log.info("fastbuild: evicting the PCH in %s (%s keeps %d)", ready.parent, KEEP_ENV, limit)
        ready.unlink(missing_ok=True)  # first, so nobody takes it for ready while it goes
        (ready.parent / f"{HEADER}.gch").unlink(missing_ok=True)


def _build(directory: Path, cxx: str, flags: str) -> Path | None:
    """Compile the PCH to a temporary name, rename it into place, probe it; record the outcome."""
    for stale in directory.glob(f"{HEADER}.gch.tmp*"):
        stale.unlink(missing_ok=True)  # left by a builder that died holding the lock
    header = directory / HEADER
    write_atomic(header, "#include <torch/extension.h>\n")
    tmp = directory / f"{HEADER}.gch.tmp{os.getpid()}"
    argv = [*shlex.split(cxx), "-x", "c++-header", *shlex.split(flags), str(header), "-o", str(tmp)]
    write_atomic(directory / "flags.txt", flags + "\n")
    write_atomic(directory / "command.txt", shlex.join(argv) + "\n")
    ok, output = _run(argv)
    if not ok:
        tmp.unlink(missing_ok=True)
        return _fail(directory, f"building the PCH failed:\n{output}")
    os.replace(tmp, directory / f"{HEADER}.gch")
    probed = _probe(directory, cxx, flags)
    if probed is not None:
        return _fail(directory, f"GCC does not use the PCH:\n{probed}")
    write_atomic(directory / "ready", "ok\n")
    return header


def _probe(directory: Path, cxx: str, flags: str) -> str | None:
    """None when GCC really uses the PCH for a TU like torch's main.cpp, else what it said.

    `-H` prints `! path.gch` for a PCH in use (`x` for one rejected); the probe defines
    TORCH_EXTENSION_NAME as a real build does, so a header that read it would fail here.
    """
    source = directory / "probe.cpp"
    write_atomic(source, "#include <torch/extension.h>\nint kr_probe() { return 0; }\n")
    argv = [*shlex.split(cxx), "-DTORCH_EXTENSION_NAME=kr_probe", *shlex.split(flags), "-H",
            "-Winvalid-pch", "-include", str(directory / HEADER), "-fsyntax-only", str(source)]
    _, output = _run(argv)
    used = any(ln.startswith("! ") and ln.endswith(f"{HEADER}.gch") for ln in output.splitlines())
    return None if used else "\n".join(output.splitlines()[-20:])


def _run(argv: list[str]) -> tuple[bool, str]:
    """Run a compiler through the project's process launcher: (exited 0, its output tail).

    No file-size limit (a PCH of torch's headers is ~800 MB) and no sandbox: these are the
    trusted compiler and flags, run where the caller already runs.
    """
    from feedback.sandbox import run_child

    with tempfile.TemporaryDirectory(prefix="kr-pch-") as tmp:
        out = run_child(argv, cwd=Path(tmp), env={**os.environ, "LC_ALL": "C"},
                        timeout_s=BUILD_TIMEOUT_S, max_output_bytes=None, isolate=False)
    return out.ok, (out.stdout_tail + out.stderr_tail).strip() or out.describe(BUILD_TIMEOUT_S)


def _recent_failure(directory: Path) -> bool:
    """A recorded failure younger than FAILED_RETRY_S: not retried (a failure may be transient,
    a killed compiler say, so it is not forever)."""
    try:
        return time.time() - (directory / "failed").stat().st_mtime < FAILED_RETRY_S
    except OSError:
        return False


def _fail(directory: Path, why: str) -> None:
    """Record why (retried after FAILED_RETRY_S) and warn."""
    log.warning("fastbuild: precompiled header disabled for these flags: %s", why[-2000:])
    write_atomic(directory / "failed", why + "\n")
