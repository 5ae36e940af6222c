"""What `agent.refine` and `agent.sample` share at the command line: errors, exit codes, the table.

Exit codes: 0 all trajectories finished (or `--check` / `--dry-run` found nothing wrong); 1 some
ended with an error (the rest are stored and a `--resume` retries them); 2 a usage problem (no
model, bad option, a failed preflight: missing key, toolchain, problems, output folder), one
line each; 130 Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Literal

from pydantic import ValidationError
from rich.console import Console

from agent.llm import LLMError
from agent.preflight import PreflightError
from agent.progress import refine_table, sample_table
from agent.runner import Mode, Outcome, execute, run_settings
from agent.settings import RefineSettings, RunSettings
from agent.store import RunStore
from problems.cli import user_error

Action = Literal["run", "check", "plan"]
FLAGS = {"llm_args": "--llm-arg", "eval_options": "--eval-option"}
"""Settings fields whose flag is not `--field-name`."""


def print_summary(outcome: Outcome, console: Console | None = None) -> None:
    """The end-of-run table (from the store), the failures, and where the run lives."""
    console = console or Console(soft_wrap=True)
    settings = outcome.settings
    trajectories = RunStore(outcome.path).trajectories(settings.noise_margin)
    if isinstance(settings, RefineSettings):
        expected = len(outcome.problems) * settings.trajectories
        table = refine_table(trajectories, expected, settings.turns)
    else:
        table = sample_table(trajectories, len(outcome.problems), settings.k)
    console.print(table)
    for key, error in outcome.failed.items():
        console.print(f"[red]failed[/red] {key}: {error}", markup=True, highlight=False)
    console.print(f"run stored in {outcome.path}", highlight=False)
    if outcome.failed:
        console.print(f"retry the failed trajectories with --resume {outcome.path}",
                      highlight=False)


def run_cli(make_settings: Callable[[], RunSettings], mode: Mode, action: Action = "run") -> int:
    """Build the settings, then run (`run`), preflight only (`check`) or print the plan (`plan`);
    known errors become one clear line each."""
    try:
        settings = make_settings()
        if action != "run":
            return _check(settings, mode) if action == "check" else _plan(settings, mode)
        outcome = execute(settings, mode)
    except PreflightError as e:
        for line in e.lines:
            print(f"error: {line}", file=sys.stderr)
        return 2
    except ValidationError as e:  # a bad option value: its flag, not pydantic's text
        print(f"error: {user_error(e, FLAGS)}", file=sys.stderr)
        return 2
    except (ValueError, LLMError, FileNotFoundError, FileExistsError) as e:
        # set-up errors: no model (MissingModelError), bad option, unreadable replay or run dir
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every finished attempt is stored; continue with --resume RUN_DIR "
              "(the run directory is in the log above)", file=sys.stderr)
        return 130
    print_summary(outcome)
    return 1 if outcome.failed else 0


def _check(settings: RunSettings, mode: Mode) -> int:
    from agent.check import check_run, describe

    print("\n".join(describe(check_run(run_settings(settings, mode)))))
    return 0


def _plan(settings: RunSettings, mode: Mode) -> int:
    from agent.plan import describe, plan_run
    from agent.preflight import select_problems

    settings = run_settings(settings, mode)
    print("\n".join(describe(plan_run(settings, select_problems(settings.problems)), settings)))
    return 0
