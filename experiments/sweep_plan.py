"""A sweep before it runs: every run preflighted at once, and the plan `--dry-run` prints.

Runs that would start or resume are checked with the agent's own preflight (settings, model
credentials, toolchain, problems, output folder) before the first one starts, so a typo in a
key or a spec fails the sweep in seconds, not after every other run has spent its budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.preflight import PreflightError, preflight
from agent.settings import RefineSettings, RunSettings, SampleSettings
from problems.cli import user_error
from problems.record import Problem

if TYPE_CHECKING:
    from experiments.sweep import PlannedRun


@dataclass(frozen=True)
class CheckedRun:
    """A planned run whose settings resolved and passed the preflight."""

    name: str
    action: str
    settings: RunSettings
    problems: list[Problem]


def preflight_sweep(plan: list[PlannedRun], entries: list[dict[str, Any]],
                    out: Path) -> list[CheckedRun]:
    """Check every run that would start or resume (ENTRIES from a dry `execute`).

    Raises:
        PreflightError: one line per distinct failure, each naming its run where it is the
            run's own (a bad settings value), else shared (a missing key, a missing compiler).
    """
    failures: list[str] = []
    checked = []
    for run, entry in zip(plan, entries):
        if entry["action"] == "skip":
            continue
        kind = RefineSettings if run.mode == "refine" else SampleSettings
        try:
            settings = kind(**run.settings, out=out).resolved()
        except ValueError as e:  # pydantic's ValidationError included: its keys, one line
            failures.append(f"run {run.name}: {user_error(e, flags=str)}")
            continue
        found = preflight(settings)
        failures += [line for line in found.failures if line not in failures]
        checked.append(CheckedRun(run.name, entry["action"], settings, found.problems))
    if failures:
        raise PreflightError(failures)
    return checked


def plan_table(checked: list[CheckedRun]) -> str:
    """Every run to start or resume: its shape and the most it may spend, with a total."""
    from agent.plan import plan_run
    from experiments.tables import markdown_table

    rows, calls, tokens = [], 0, 0
    for run in checked:
        p = plan_run(run.settings, run.problems)
        calls += p.calls
        tokens = None if tokens is None or p.max_tokens is None else tokens + p.max_tokens
        rows.append([run.name, p.mode, run.action, len(p.problems), p.per_problem, p.turns,
                     p.calls, p.first_prompt_tokens, p.max_tokens, p.max_usd,
                     ", ".join(f"{k}={v}" for k, v in {"backend": p.backend,
                                                       **p.evaluator}.items())])
    rows.append(["all runs", "", "", "", "", "", calls, "", tokens, "", ""])
    headers = ["run", "mode", "action", "problems", "trajectories or k", "turns",
               "most LLM calls", "first-turn prompt tokens", "most tokens", "most dollars",
               "evaluator"]
    return ("plan (nothing is called; skipped runs are finished):\n"
            + markdown_table(headers, rows))
