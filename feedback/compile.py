"""The compile stage: build a candidate once, in a sandboxed child, and remember the outcome.

A build is the expensive step (45 s for a C++ extension, 77 s for CUDA on two cores), and the
same source comes back often (refinement turns, re-evaluations, tests), so the outcome is cached
on disk by source + toolchain + arch (see feedback/cache.py): a hit answers in milliseconds without
starting a child, and a known-broken source gets its same message back instantly. Timeouts and
crashes of the build child are not cached; they may be the machine's fault.
"""

from __future__ import annotations

import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from feedback import cache, fastbuild_prepare
from feedback.environment import cuda_arch, toolchain
from feedback.job import BUILD_FILE_BYTES, launch
from feedback.messages import bound, clean_message
from feedback.options import Backend, EvalOptions
from feedback.result import Status
from problems.record import Problem

LOG_CHARS = 16_000


class BuildPaths(BaseModel):
    """Where one candidate's build lives."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="Build cache key (source, backend, toolchain, arch).")
    directory: Path = Field(description="<cache>/build/<key>.")
    candidate: Path = Field(description="The candidate's own file.")
    outcome: Path = Field(description="The cached CompileOutcome.")
    extensions_dir: Path = Field(description="TORCH_EXTENSIONS_DIR, shared by extension sources.")
    arch: str | None = Field(description="TORCH_CUDA_ARCH_LIST of the build (None on cpp).")


class CompileOutcome(BaseModel):
    """What building (and importing) a candidate gave."""

    model_config = ConfigDict(frozen=True)

    status: Status = Field(description="ok, compile_error or timeout.")
    message: str = Field(default="", description="Cleaned, bounded error for the model.")
    log: str = Field(default="", description="The build's own output (tail), paths stripped.")
    cached: bool = Field(default=False, description="Answered from the cache, no child started.")
    seconds: float = Field(default=0.0, description="Wall time of this call.")
    build_seconds: float = Field(default=0.0, description="Wall time of the build that produced it.")
    warnings: list[str] = Field(default_factory=list, description="Reported by the builder.")


def locate(code: str, backend: Backend, options: EvalOptions) -> BuildPaths:
    """The cache paths of a candidate (cheap: no child, toolchain facts are memoised)."""
    arch = cuda_arch(options.device, options.arch) if backend != "cpp" else None
    tools = toolchain(backend)
    key = cache.build_key(code, backend, tools, arch)
    root = Path(options.cache_dir).resolve()
    directory = root / "build" / key
    ext = root / "ext" / cache.extension_key(code, backend, tools, arch)
    return BuildPaths(key=key, directory=directory, candidate=directory / "candidate.py",
                      outcome=directory / "outcome.json", extensions_dir=ext, arch=arch)


def path_names(paths: BuildPaths) -> dict[str, str]:
    """Paths to hide in messages, with the candidate's own names."""
    return {str(paths.candidate): "candidate.py", str(paths.extensions_dir): "build"}


def compile_candidate(problem: Problem, code: str, backend: Backend,
                      options: EvalOptions) -> CompileOutcome:
    """Build and import the candidate in a child (or answer from the cache)."""
    start = time.monotonic()
    paths = locate(code, backend, options)
    hit = _hit(paths)
    if hit is not None:
        return hit.model_copy(update={"cached": True, "seconds": time.monotonic() - start})
    with cache.locked(paths.directory.with_suffix(".lock")):
        hit = _hit(paths)  # a concurrent build finished
        if hit is not None:
            return hit.model_copy(update={"cached": True, "seconds": time.monotonic() - start})
        if not paths.candidate.exists() or paths.candidate.read_text() != code:
            cache.write_atomic(paths.candidate, code)
        with cache.locked(paths.extensions_dir.with_suffix(".lock")):
            # the PCH of torch's headers is built here, trusted: the child sees the cache read-only
            fastbuild_prepare.prepare(code, backend, options.cache_dir)
            outcome, deterministic = _build(problem, backend, options, paths)
        outcome = outcome.model_copy(update={"seconds": time.monotonic() - start,
                                             "build_seconds": time.monotonic() - start})
        if deterministic:
            cache.write_record(paths.outcome, outcome)
    return outcome


def _hit(paths: BuildPaths) -> CompileOutcome | None:
    """The cached outcome, when the candidate file it was built from is still beside it (every
    later job imports that file; an outcome without it, from a cache pruned by hand, is a miss)."""
    return cache.read_record(paths.outcome, CompileOutcome) if paths.candidate.exists() else None


def _build(problem: Problem, backend: Backend, options: EvalOptions,
           paths: BuildPaths) -> tuple[CompileOutcome, bool]:
    """Run one build child; returns the outcome and whether it may be cached."""
    paths.extensions_dir.mkdir(parents=True, exist_ok=True)
    run = launch("build", problem, backend, options, candidate=paths.candidate,
                 extensions_dir=paths.extensions_dir, arch=paths.arch, gpu_index=None,
                 timeout_s=options.compile_timeout_s, max_output_bytes=BUILD_FILE_BYTES)
    names = path_names(paths)
    raw_log = "\n".join(t for t in (run.outcome.stdout_tail, run.outcome.stderr_tail) if t.strip())
    log = bound(clean_message(raw_log, names, max_lines=400), 400, LOG_CHARS, keep="tail")
    report = run.report
    if report.status == Status.ok:
        return CompileOutcome(status=Status.ok, log=log, warnings=report.warnings), True
    status = Status.timeout if report.status == Status.timeout else Status.compile_error
    message = clean_message(report.message, names)
    if not run.trusted and not report.message.strip():
        message = clean_message(raw_log, names)
    return CompileOutcome(status=status, message=message, log=log, warnings=report.warnings), \
        run.trusted
