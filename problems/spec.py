"""The one parser of problem-selection specs, used by every CLI (`--problems SPEC`).

A spec is a comma-separated list of items; the union is returned in the order given, each id once.

    suite:                      the whole suite
    suite:level1                one level of the suite
    suite:level2/12             by number
    suite:level1/relu           by name (case-insensitive; `19_relu` works too)
    suite:level1/*norm*         by glob (`*`, `?`, `[...]`); `suite:*norm*` spans all levels
    level1, level2/12, ...      the same without `suite:` (a bare `levelN...` is always the suite;
                                write `./level1` for a folder of that name)
    PATH.py                     one KernelBench-format file
    PATH                        a levelN folder, a folder holding level1.., or a KernelBench checkout
    PATH.parquet                KernelBench dataset rows (columns code, level, name, problem_id)
    PATH#PATTERN                any path filtered by a pattern: `kb.parquet#level2`,
                                `KernelBench#level1/19`, `kb.parquet#level3/*lstm*`

Paths may not contain commas. Broken files are not spec errors: they come back in
`Selection.errors` beside the problems that loaded.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

from problems.loaders import load_file, load_folder, load_parquet, load_suite
from problems.module import ProblemLoadError
from problems.record import Problem, Selection

SUITE_PREFIX = "suite:"
FORMS = ("suite:[levelN[/NUMBER|/NAME|/GLOB]]", "levelN[/...]", "FILE.py", "FOLDER[#PATTERN]",
         "FILE.parquet[#PATTERN]")
_BARE_LEVEL = re.compile(r"^level[\d*?\[]")


class SpecError(ValueError):
    """A spec that names nothing: unknown form, missing path, or a pattern matching no problem."""


def select(spec: str) -> Selection:
    """Resolve a spec string to the problems it names (see the module docstring for the forms).

    Raises:
        SpecError: an item of an unknown form, a path that does not exist, an unreadable folder
            or parquet file, or an item that matches no problem.
    """
    items = [item.strip() for item in spec.split(",")]
    if not spec.strip() or not all(items):
        raise SpecError(f"empty problem spec {spec!r}; accepted forms: {', '.join(FORMS)}")
    suite: Selection | None = None
    result = Selection()
    for item in items:
        if item.startswith(SUITE_PREFIX) or _BARE_LEVEL.match(item):
            suite = suite or load_suite()
            source, pattern = suite, item.removeprefix(SUITE_PREFIX)
        else:
            path_text, _, pattern = item.partition("#")
            source = _load_path(Path(path_text), item)
        chosen = tuple(p for p in source.problems if matches(p, pattern))
        if not chosen and not source.errors:
            raise SpecError(f"{item}: matched no problem")
        result = result + Selection(problems=chosen, errors=source.errors)
    return result


def matches(problem: Problem, pattern: str) -> bool:
    """Whether a problem fits `levelN`, `levelN/WHICH` or a bare `WHICH` (all levels).

    WHICH is a number (exact), or a case-insensitive name or glob matched against both the name
    and `NUMBER_name`. An empty pattern matches everything; the level part may be a glob too.
    """
    if not pattern:
        return True
    if "/" in pattern:
        level_part, which = pattern.split("/", 1)
    elif _BARE_LEVEL.match(pattern):
        level_part, which = pattern, ""
    else:
        level_part, which = "", pattern
    if level_part and not fnmatch.fnmatchcase(f"level{problem.level}", level_part.lower()):
        return False
    if not which:
        return True
    if which.isdigit():
        return problem.number == int(which)
    which = which.lower()
    names = (problem.name.lower(), f"{problem.number}_{problem.name}".lower())
    return any(fnmatch.fnmatchcase(n, which) for n in names)


def _load_path(path: Path, item: str) -> Selection:
    """Load what a path designates; a missing path or an unknown form is a `SpecError`."""
    if not path.exists():
        raise SpecError(f"{item}: no such file or folder, and not a suite spec; "
                        f"accepted forms: {', '.join(FORMS)}")
    try:
        if path.is_dir():
            return load_folder(path)
        if path.suffix == ".parquet":
            return load_parquet(path)
        if path.suffix == ".py":
            try:
                return Selection(problems=(load_file(path),))
            except ProblemLoadError as exc:
                return Selection(errors=(str(exc),))
    except ProblemLoadError as exc:  # the folder or parquet file itself is unusable
        raise SpecError(str(exc)) from exc
    raise SpecError(f"{item}: not a .py file, a folder or a .parquet file; "
                    f"accepted forms: {', '.join(FORMS)}")
