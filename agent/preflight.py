"""Preflight: everything a run needs, checked before its first LLM call and its first build.

The model (litellm can route it, its provider's credentials are set, a replay file loads), the
backend's toolchain on this machine (`feedback.toolchain`), the problems the spec selects, and an
output folder that can be written. Every failure is one line naming what is missing and how to
fix it; all of them are reported at once, and nothing is created or stored.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from agent.settings import RunSettings
from problems.record import Problem


class PreflightError(ValueError):
    """What a run lacks, one line per failure (`lines`)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


@dataclass
class Preflight:
    """What a run would use (`uses`: label -> value), its problems, and what it lacks."""

    problems: list[Problem] = field(default_factory=list)
    uses: dict[str, str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def raise_failures(self) -> Preflight:
        """Self when nothing failed; else PreflightError with every failure."""
        if self.failures:
            raise PreflightError(self.failures)
        return self


def preflight(settings: RunSettings, *, model: bool = True, toolchain: bool = True,
              writable: Path | None = None) -> Preflight:
    """Check a resolved run's model, toolchain, problems and output folder; collect, not raise.

    Args:
        model: check the model (off when the caller injects its own LLM client).
        toolchain: check the backend's tools here (off for an injected evaluator, and for
            `--executor ray`, whose nodes build and run the kernels).
        writable: the folder that must be writable (default: `settings.out`).
    """
    found = Preflight()
    if model:
        _check_model(settings, found)
    if toolchain and settings.executor == "local":
        _check_toolchain(settings, found)
    else:
        found.uses["backend"] = f"{settings.backend} (built and run by the {settings.executor} "\
            "executor; toolchain not checked here)"
    _check_problems(settings, found)
    _check_writable(writable or settings.out, found)
    return found


def _check_model(settings: RunSettings, found: Preflight) -> None:
    from agent.llm import LLMError, make_client, missing_credentials, model_facts

    model = settings.model or ""
    try:
        make_client(model, llm_args=settings.llm_args)  # routing, replay file, reserved args
        facts = model_facts(model, settings.llm_args)
    except LLMError as e:
        found.failures.append(str(e))
        return
    found.uses["model"] = model + (f" (provider {facts.provider})" if facts.provider else "")
    for name in missing_credentials(model, settings.llm_args):
        arg = "api_base" if "BASE" in name or "URL" in name else \
            "api_version" if "VERSION" in name else "api_key"
        found.failures.append(f"model {model!r} needs {name}, which is not set: export "
                              f"{name}=... (or pass --llm-arg {arg}=...)")
    if "api_base" in settings.llm_args:
        found.uses["api_base"] = str(settings.llm_args["api_base"])


def _check_toolchain(settings: RunSettings, found: Preflight) -> None:
    from feedback.toolchain import check_toolchain

    tools = check_toolchain(settings.backend)
    found.uses["backend"] = str(settings.backend)
    found.uses.update(tools.facts)
    found.failures.extend(tools.missing)


class ProblemSpecError(ValueError):
    """The problem spec selected nothing, or named something that does not load."""


def select_problems(spec: str) -> list[Problem]:
    """The problems a spec names; any error is a ProblemSpecError listing every bad part."""
    from problems.spec import select

    try:
        selection = select(spec)
    except Exception as e:  # the spec parser's own message is the useful part
        raise ProblemSpecError(f"problem spec {spec!r}: {e}") from e
    if selection.errors or not selection.problems:
        lines = "\n  ".join(selection.errors) or "it matches no problem"
        raise ProblemSpecError(f"problem spec {spec!r}:\n  {lines}")
    return list(selection.problems)


def _check_problems(settings: RunSettings, found: Preflight) -> None:
    try:
        found.problems = select_problems(settings.problems)
    except ProblemSpecError as e:
        head, *parts = str(e).splitlines()
        found.failures.extend([f"{head} {p.strip()}" for p in parts] if parts else [head])
        return
    found.uses["problems"] = f"{len(found.problems)} from {settings.problems}"


def _check_writable(folder: Path, found: Preflight) -> None:
    """FOLDER, or the nearest folder above it that exists, must be a writable directory."""
    existing = Path(folder).absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        found.failures.append(f"output folder {folder}: {existing} is a file, not a folder: "
                              "pass --out DIR")
    elif not os.access(existing, os.W_OK | os.X_OK):
        found.failures.append(f"output folder {folder}: {existing} is not writable: pass --out "
                              "DIR somewhere you can write")
    else:
        found.uses["output folder"] = str(folder)
