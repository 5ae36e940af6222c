"""`python -m problems check SPEC [--size S] [--device cpu|cuda] [--tolerance T] [--json]`.

Runs the degeneracy tests of degeneracy.py over every problem a spec selects (a suite, a
KernelBench checkout, a parquet file) and prints a table (or, with --json, one JSON array of
`ProblemCheck` records). Exit status: 0 when every problem was checked and none is degenerate,
1 when one is degenerate or could not be checked, 2 for a spec that names nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

from rich.console import Console
from rich.table import Table

from problems.degeneracy import TOLERANCES, check_problem
from problems.spec import FORMS, Selection, SpecError, select


def add_parser(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser("check", help="degeneracy tests of each problem's reference")
    check.add_argument("spec", help=f"problem spec; forms: {', '.join(FORMS)}")
    check.add_argument("--size", default=None, help="size preset, e.g. small")
    check.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the reference runs")
    check.add_argument("--tolerance", default="fp64-relative", choices=TOLERANCES,
                       help="tolerance the constant answers are judged under")
    check.add_argument("--trials", type=int, default=3, help="input sets judged per problem")
    check.add_argument("--json", action="store_true", help="print a JSON array of records")


def console_and_selection(spec: str) -> tuple[Console, Selection | None]:
    """A console (wide when piped, so ids and shapes stay on one line for grep and for tests)
    and the problems `spec` selects, or None after printing why it selects nothing."""
    console = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        return console, select(spec)
    except SpecError as exc:
        console.print(f"error: {exc}", markup=False, highlight=False)
        return console, None


def run(args: argparse.Namespace) -> int:
    console, selection = console_and_selection(args.spec)
    if selection is None:
        return 2
    checks = [check_problem(p, device=args.device, size=args.size if args.size in p.sizes else None,
                            tolerance=args.tolerance, trials=args.trials) for p in selection.problems]
    bad = sum(c.degenerate or c.error is not None for c in checks) + len(selection.errors)
    if args.json:
        print(json.dumps([c.model_dump() for c in checks], indent=1))
        for line in selection.errors:
            print(f"error: {line}", file=sys.stderr)
        return 1 if bad else 0
    table = Table(title=f"{args.spec}: degeneracy ({args.tolerance}, {args.device})")
    for column in ("id", "verdict", "max |ref|", "findings"):
        table.add_column(column, no_wrap=column == "id")
    for c in checks:
        verdict = "error" if c.error else "DEGENERATE" if c.degenerate else "ok"
        scale = "" if c.scale is None else f"{c.scale:.3g}"
        table.add_row(c.id, verdict, scale, c.error or "; ".join(c.findings))
    console.print(table)
    degenerate = sum(c.degenerate for c in checks)
    console.print(f"{len(checks)} problems checked; {degenerate} degenerate; "
                  f"{sum(c.error is not None for c in checks) + len(selection.errors)} errors",
                  markup=False, highlight=False)
    for line in selection.errors:
        console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
    return 1 if bad else 0
