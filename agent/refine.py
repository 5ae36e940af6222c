"""`python -m agent.refine`: multi-turn refinement of many problems, and its Python API `run()`.

    python -m agent.refine --model MODEL --problems suite:level1 --feedback G+E+P --turns 10
    python -m agent.refine --resume runs/<run dir>      # continue a killed run
    python -m agent.refine --check ...                  # preflight + one tiny completion
    python -m agent.refine --dry-run ...                # the plan and its most spend
    python -m agent.refine --draw                       # the graph, as Mermaid
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from agent.settings import RefineSettings, RunSettings
from problems.cli import CLIParser, checked


def run(settings: RefineSettings, *, llm=None, evaluator=None) -> Path:
    """Run (or, with `settings.resume`, continue) a refinement run; return its directory.

    `llm` and `evaluator` replace the ones the settings would build (tests, custom backends).
    """
    from agent.runner import execute

    return execute(settings, "refine", llm=llm, evaluator=evaluator).path


def common_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `agent.refine` and `agent.sample` (help texts from the settings)."""
    fields = RunSettings.model_fields

    def add(flag: str, name: str, **kw) -> None:
        parser.add_argument(flag, dest=name, help=fields[name].description, **kw)

    add("--model", "model")
    add("--problems", "problems")
    add("--backend", "backend", choices=["cuda", "triton", "cpp"])
    add("--size", "size")
    add("--temperature", "temperature", type=float)
    add("--concurrency", "concurrency", type=int)
    add("--out", "out", type=Path)
    add("--resume", "resume", type=Path, metavar="RUN_DIR")
    parser.add_argument("--llm-arg", dest="llm_args", action="append", metavar="K=V",
                        help="Provider option passed through to litellm (repeatable), e.g. "
                        "reasoning_effort=high or api_base=http://localhost:8000/v1.")
    parser.add_argument("--eval-option", dest="eval_options", action="append", metavar="K=V",
                        help="Evaluator option (feedback.options.EvalOptions field), repeatable, "
                        "e.g. timing_trials=50 or tolerance=kernelbench.")
    add("--seed", "seed", type=int)
    add("--name", "name")
    add("--hardware", "hardware", action="store_const", const=True)
    add("--log-format", "log_format", choices=["console", "json"])
    add("--noise-margin", "noise_margin", type=float)
    add("--executor", "executor", choices=["local", "ray"])
    add("--ray-address", "ray_address", metavar="auto|HOST:PORT")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--check", dest="action", action="store_const", const="check",
                      default="run", help="Check only: model credentials (and one minimal "
                      "completion from a hosted model), toolchain, problems, output folder; "
                      "say what a run would use.")
    what.add_argument("--dry-run", dest="action", action="store_const", const="plan",
                      help="Print the plan (problems, trajectories or samples, turns, the most "
                      "LLM calls and tokens, evaluator settings) and call nothing.")


def settings_from(args: argparse.Namespace, cls: type[RunSettings]) -> RunSettings:
    """Settings from parsed arguments: only the options given override the defaults."""
    given = {k: v for k, v in vars(args).items() if v is not None and k in cls.model_fields}
    from agent.llm import parse_llm_args

    for name in ("llm_args", "eval_options"):
        if getattr(args, name):
            given[name] = parse_llm_args(getattr(args, name))
    return cls(**given)


def _feedback_mode(text: str) -> str:
    from agent.conversation import FeedbackMode

    return str(FeedbackMode.parse(text))


def main(argv: list[str] | None = None) -> int:
    from agent.cli import run_cli

    parser = CLIParser(prog="python -m agent.refine", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common_arguments(parser)
    fields = RefineSettings.model_fields
    parser.add_argument("--feedback", type=checked(_feedback_mode), metavar="G|G+E|G+E+P",
                        help=fields["feedback"].description)
    parser.add_argument("--turns", type=int, help=fields["turns"].description)
    parser.add_argument("--history", choices=["last", "all"], help=fields["history"].description)
    parser.add_argument("--trajectories", type=int, help=fields["trajectories"].description)
    parser.add_argument("--target-speedup", dest="target_speedup", type=float,
                        help=fields["target_speedup"].description)
    parser.add_argument("--draw", action="store_true", help="Print the graph as Mermaid and exit.")
    args = parser.parse_args(argv)
    if args.draw:
        from agent.graph import make_graph

        print(make_graph().get_graph().draw_mermaid())
        return 0
    return run_cli(lambda: settings_from(args, RefineSettings), "refine", args.action)


if __name__ == "__main__":
    sys.exit(main())
