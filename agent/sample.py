"""`python -m agent.sample`: k independent one-shot samples per problem, and its API `run()`.

    python -m agent.sample --model MODEL --problems suite:level2 --k 10 --temperature 0.7

Samples go to the same store format as refinement (mode `sample`, index = sample, turn 0), so
fast_p@k and fast_p@N are computed from the same records.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agent.refine import common_arguments, settings_from
from agent.settings import SampleSettings
from problems.cli import CLIParser


def run(settings: SampleSettings, *, llm=None, evaluator=None) -> Path:
    """Draw (or, with `settings.resume`, finish drawing) the samples; return the run directory."""
    from agent.runner import execute

    return execute(settings, "sample", llm=llm, evaluator=evaluator).path


def main(argv: list[str] | None = None) -> int:
    from agent.cli import run_cli

    parser = CLIParser(prog="python -m agent.sample", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(parser)
    parser.add_argument("--k", type=int, help=SampleSettings.model_fields["k"].description)
    args = parser.parse_args(argv)
    return run_cli(lambda: settings_from(args, SampleSettings), "sample", args.action)


if __name__ == "__main__":
    sys.exit(main())
