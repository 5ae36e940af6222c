"""`python -m problems list [SPEC] [--size small]`: what a spec selects, as a table.

Prints id, level, name, tags and input shapes (computed on the meta device, so nothing is
allocated), then one line per file that failed to load. Exit status: 0 when at least one problem
loaded, 1 when none did, 2 for a spec that names nothing.
"""

from __future__ import annotations

import sys
from collections import Counter

from rich.table import Table

from problems import checking
from problems.cli import CLIParser
from problems.inputs import describe_inputs
from problems.listing import print_json
from problems.module import ProblemLoadError
from problems.record import Problem
from problems.spec import FORMS


def main(argv: list[str] | None = None) -> int:
    parser = CLIParser(prog="python -m problems", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list the problems a spec selects")
    listing.add_argument("spec", nargs="?", default="suite:",
                         help=f"problem spec (default suite:); forms: {', '.join(FORMS)}")
    listing.add_argument("--size", default=None, help="size preset for the shapes, e.g. small")
    listing.add_argument("--json", action="store_true", help="print a JSON array (id, level, "
                         "name, tags, inputs, sizes); load errors go to stderr")
    checking.add_parser(commands)  # `check SPEC`: degeneracy tests (problems/checking.py)
    args = parser.parse_args(argv)
    if args.command == "check":
        return checking.run(args)

    console, selection = checking.console_and_selection(args.spec)
    if selection is None:
        return 2
    if args.json:
        return print_json(selection, args.size)

    table = Table(title=f"{args.spec} ({args.size or 'default'} size)")
    for column in ("id", "level", "name", "tags", "inputs"):
        table.add_column(column, no_wrap=column == "id")
    errors = list(selection.errors)
    for problem in selection.problems:
        table.add_row(problem.id, str(problem.level), problem.name, ", ".join(problem.tags),
                      _inputs_cell(problem, args.size, errors))
    console.print(table)

    levels = Counter(p.level for p in selection.problems)
    summary = ", ".join(f"level{lv}: {n}" for lv, n in sorted(levels.items()))
    console.print(f"{len(selection.problems)} problems ({summary}); {len(errors)} errors",
                  markup=False, highlight=False)
    for line in errors:
        console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    return 0 if selection.problems else 1


def _inputs_cell(problem: Problem, size: str | None, errors: list[str]) -> str:
    """Input shapes, or `?` with the reason added to `errors` when they cannot be worked out.

    A problem without the requested preset (KernelBench files have none) is shown at its default
    size, marked `(default)`.
    """
    has_size = size is None or size in problem.sizes
    try:
        shapes = "; ".join(describe_inputs(problem, size if has_size else None))
        return shapes if has_size else f"{shapes} (default)"
    except ProblemLoadError as exc:
        errors.append(str(exc))
    # get_inputs() may not run on the meta device (e.g. it calls .item()); the table still prints.
    except Exception as exc:  # noqa: BLE001
        errors.append(f"{problem.origin}: inputs unknown on the meta device: "
                      f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
    return "?"

if __name__ == "__main__":
    sys.exit(main())
