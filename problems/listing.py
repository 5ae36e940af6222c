"""`python -m problems list SPEC --json`: the selection as a JSON array, for scripts.

One object per problem: id, level, name, tags, inputs (dtype and shape of each tensor, worked
out on the meta device), sizes (the presets and the constants each overrides), and
`inputs_error` when the inputs cannot be worked out there.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from problems.inputs import input_record, meta_inputs
from problems.record import Problem, Selection


def problem_entry(problem: Problem, size: str | None = None) -> dict[str, Any]:
    """The JSON object of one problem; inputs at SIZE when the problem has that preset."""
    preset = size if size in problem.sizes else None
    entry: dict[str, Any] = {"id": problem.id, "level": problem.level, "name": problem.name,
                             "tags": list(problem.tags), "sizes": problem.sizes,
                             "size": preset or "default"}
    try:
        entry["inputs"] = [input_record(x) for x in meta_inputs(problem, preset)]
    except Exception as exc:  # noqa: BLE001 (a load error, or get_inputs() not meta-safe)
        entry["inputs"] = None
        entry["inputs_error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
    return entry


def print_json(selection: Selection, size: str | None = None) -> int:
    """Print the array to stdout and each load error to stderr; 0 when a problem loaded."""
    print(json.dumps([problem_entry(p, size) for p in selection.problems], indent=1))
    for line in selection.errors:
        print(f"error: {line}", file=sys.stderr)
    return 0 if selection.problems else 1
