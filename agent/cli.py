"""What `agent.refine` and `agent.sample` share at the command line: errors, exit codes, the table.

Exit codes: 0 all trajectories finished; 1 some ended with an error (the rest are stored and a
`--resume` retries them); 2 a usage problem (no model, bad problem spec, bad option); 130 Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from rich.console import Console

from agent.llm import LLMError
from agent.progress import refine_table, sample_table
from agent.runner import Mode, Outcome, execute
from agent.settings import RefineSettings, RunSettings
from agent.store import RunStore


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


def run_cli(make_settings: Callable[[], RunSettings], mode: Mode) -> int:
    """Build the settings, run, print the summary; turn known errors into clear messages."""
    try:
        outcome = execute(make_settings(), mode)
    except (ValueError, LLMError, FileNotFoundError, FileExistsError) as e:
        # set-up errors: no model (MissingModelError), bad spec, bad option, unreadable replay
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: every finished attempt is stored; continue with --resume RUN_DIR "
              "(the run directory is in the log above)", file=sys.stderr)
        return 130
    print_summary(outcome)
    return 1 if outcome.failed else 0
