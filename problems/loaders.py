"""Turn files, folders and parquet rows into `Problem` records, without executing anything.

Loading is deliberately cheap and side-effect free: the source is parsed, checked for
`class Model`, `def get_inputs` and `def get_init_inputs`, and its `SIZES` / `TAGS` literals are
read with `ast.literal_eval`. Running the code is `problems.module.load_module`'s job, so listing
250 KernelBench problems never imports a CUDA extension or allocates a tensor.

Folder and parquet loading return a `Selection`: the problems that loaded plus one error line per
bad file, so one broken file never hides the others.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from problems.module import REQUIRED_NAMES, ProblemLoadError, parse_source
from problems.record import Problem, Selection

SUITE_ROOT = Path(__file__).parent / "suite"
"""The project's own problems: `suite/levelN/NN_name.py`."""

_FILE_NAME = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")


def problem_from_source(source: str, *, origin: str, level: int, number: int, name: str,
                        id: str | None = None) -> Problem:
    """Validate one program's source and build its record.

    Args:
        source: the program text.
        origin: where it came from (a path or `parquet:FILE#ROW`); used in every error message.
        level, number, name: the KernelBench coordinates; `id` defaults to `level{L}/{N}_{name}`.

    Raises:
        ProblemLoadError: syntax error, a required name missing, or malformed `SIZES` / `TAGS`.
    """
    tree = parse_source(source, origin)
    defined = _top_level_names(tree)
    missing = [n for n in REQUIRED_NAMES if n not in defined]
    if missing:
        kinds = {"Model": "class Model"}
        raise ProblemLoadError(
            f"{origin}: no {', no '.join(kinds.get(n, f'def {n}') for n in missing)}")
    literals = _top_level_literals(tree, origin, ("SIZES", "TAGS"))
    return Problem(
        id=id or f"level{level}/{number}_{name}", level=level, number=number, name=name,
        source=source, origin=origin, tags=_tags(literals.get("TAGS", ()), origin),
        sizes=_sizes(literals.get("SIZES", {}), origin))


def load_file(path: Path) -> Problem:
    """One KernelBench-format file.

    The level comes from a parent folder named `levelN` (0 when there is none); the number and
    name from a `{number}_{Name}.py` file name (number 0 and the whole stem when it has no prefix).
    """
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemLoadError(f"{path}: cannot read: {exc}") from exc
    level_match = _LEVEL_DIR.match(path.parent.name)
    level = int(level_match.group(1)) if level_match else 0
    name_match = _FILE_NAME.match(path.name)
    number, name = (int(name_match.group(1)), name_match.group(2)) if name_match else (0, path.stem)
    problem_id = f"level{level}/{path.stem}" if level else path.stem
    return problem_from_source(source, origin=str(path), level=level, number=number, name=name,
                               id=problem_id)


def load_folder(path: Path) -> Selection:
    """A `levelN` folder, a folder holding `level1..levelN`, or a KernelBench checkout's root.

    Every `.py` file in a level folder must be named `{number}_{Name}.py`; files starting with
    `_` or `.` (such as `__init__.py`) are skipped.
    """
    path = Path(path)
    problems: list[Problem] = []
    errors: list[str] = []
    for level_dir in level_folders(path):
        files = [f for f in level_dir.glob("*.py") if not f.name.startswith(("_", "."))]
        for file in sorted(files, key=_file_order):
            if not _FILE_NAME.match(file.name):
                errors.append(f"{file}: file name does not match NUMBER_Name.py (e.g. 19_ReLU.py)")
                continue
            try:
                problems.append(load_file(file))
            except ProblemLoadError as exc:
                errors.append(str(exc))
    return Selection(problems=tuple(problems), errors=tuple(errors))


def level_folders(path: Path) -> list[Path]:
    """The `levelN` folders that `path` designates, in level order."""
    if not path.is_dir():
        raise ProblemLoadError(f"{path}: not a folder")
    if _LEVEL_DIR.match(path.name):
        return [path]
    for root in (path, path / "KernelBench"):
        found = [d for d in root.glob("level*") if d.is_dir() and _LEVEL_DIR.match(d.name)]
        if found:
            return sorted(found, key=lambda d: int(d.name[len("level"):]))
    raise ProblemLoadError(f"{path}: no level folders (expected a levelN folder, a folder holding "
                           "level1, level2, ..., or a KernelBench checkout)")


def load_suite() -> Selection:
    """The project's own suite (`problems/suite`)."""
    return load_folder(SUITE_ROOT)


def load_parquet(path: Path) -> Selection:
    """Rows of the KernelBench dataset as published in parquet: `code`, `level`, `name`,
    `problem_id`. Local files only; a bad row becomes an error line, never hides the others.

    The id is `level{level}/{problem_id}_{name}`, where a `name` already carrying the
    `{problem_id}_` prefix or a `.py` suffix is used without them.
    """
    import pyarrow.parquet as pq  # heavy; only parquet specs need it

    path = Path(path)
    columns = ["code", "level", "name", "problem_id"]
    try:
        table = pq.read_table(path, columns=columns)
    except Exception as exc:  # pyarrow raises several unrelated types for bad files/columns
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ProblemLoadError(f"{path}: cannot read parquet with columns {columns}: {first}") from exc
    problems: list[Problem] = []
    errors: list[str] = []
    for row, record in enumerate(table.to_pylist()):
        origin = f"parquet:{path}#{row}"
        try:
            number, level = int(record["problem_id"]), int(record["level"])
            name = str(record["name"]).removesuffix(".py").removeprefix(f"{number}_")
            problems.append(problem_from_source(str(record["code"]), origin=origin, level=level,
                                                number=number, name=name))
        except (TypeError, ValueError) as exc:
            errors.append(f"{origin}: bad level/problem_id: {exc}")
        except ProblemLoadError as exc:
            errors.append(str(exc))
    return Selection(problems=tuple(problems), errors=tuple(errors))


def _file_order(file: Path) -> tuple[int, str]:
    match = _FILE_NAME.match(file.name)
    return (int(match.group(1)), file.name) if match else (-1, file.name)


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by `class`, `def`, assignment or import."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _top_level_literals(tree: ast.Module, origin: str, wanted: tuple[str, ...]) -> dict[str, Any]:
    """The literal values of the module-level `NAME = literal` assignments named in `wanted`."""
    values: dict[str, Any] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in wanted):
            continue
        try:
            values[node.targets[0].id] = ast.literal_eval(node.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ProblemLoadError(f"{origin}:{node.lineno}: {node.targets[0].id} must be a "
                                   f"literal ({type(exc).__name__})") from exc
    return values


def _tags(value: Any, origin: str) -> tuple[str, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(t, str) for t in value):
        raise ProblemLoadError(f"{origin}: TAGS must be a tuple of strings")
    return tuple(t.lower() for t in value)


def _sizes(value: Any, origin: str) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and all(isinstance(n, str) for n in v)
            for k, v in value.items()):
        raise ProblemLoadError(f"{origin}: SIZES must map preset names to {{CONSTANT: value}} dicts")
    return value
