"""Execute a problem's source in a module of its own, at a chosen size.

Why a brand-new module each time: a reference program and a candidate kernel must never share
a namespace (a candidate could otherwise change the problem's sizes or subclass its `Model`), and
two loads of the same problem must not see each other's state. The module gets a unique name; it
is registered in `sys.modules` under that name because `dataclasses`, `typing` and `pickle` look a
class's module up there, and nothing else ever uses that name.

Why sizes are applied to the source rather than set afterwards: a preset such as
`{"N": 64}` must also reach constants derived from `N` at module level and default arguments
(`def __init__(self, n=N)`), which are evaluated while the module executes. So the module-level
assignment of each overridden name is rewritten to the preset's value before execution.
"""

from __future__ import annotations

import ast
import itertools
import linecache
import re
import sys
import threading
import traceback
import types
from typing import Any

from problems.record import Problem

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
"""What every KernelBench-format program defines at module level."""

DEFAULT_SIZE = "default"
"""The size name meaning "the file's own constants" (the same as passing no size)."""

_counter = itertools.count()
_NON_IDENTIFIER = re.compile(r"\W")


class ProblemLoadError(Exception):
    """A problem that cannot be loaded; the message is one line: `FILE: what is wrong`."""


def load_module(problem: Problem, size: str | None = None) -> types.ModuleType:
    """Run the problem's source in a fresh module and return it.

    Args:
        problem: the record whose `source` is executed.
        size: a key of `problem.sizes` (e.g. `"small"`); `None` or `"default"` keeps the file's
            own constants.

    Raises:
        ProblemLoadError: unknown size, syntax error, an exception while executing the top level
            (import errors included), or a missing `Model` / `get_inputs` / `get_init_inputs`.
    """
    overrides = size_overrides(problem, size)
    filename = problem.origin
    tree = parse_source(problem.source, filename)
    tree = _override_assignments(tree, overrides, filename)
    with AST_LOCK:
        code = compile(tree, filename, "exec")

    name = f"_kr_problem_{_NON_IDENTIFIER.sub('_', problem.id)}_{next(_counter)}"
    module = types.ModuleType(name, doc=f"Problem {problem.id} ({size or DEFAULT_SIZE} size)")
    module.__file__ = filename
    # Tracebacks and inspect.getsource() can show the lines even for parquet rows.
    linecache.cache[filename] = (len(problem.source), None, problem.source.splitlines(True), filename)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - running the problem is this function's job
    except Exception as exc:  # anything the problem's top level raises is the problem's fault
        del sys.modules[name]
        raise ProblemLoadError(f"{_where(exc, filename)}: {_describe(exc)}") from exc
    missing = [n for n in REQUIRED_NAMES if not callable(getattr(module, n, None))]
    if missing:
        del sys.modules[name]
        raise ProblemLoadError(f"{filename}: no {', no '.join(missing)} defined at module level")
    return module


def size_overrides(problem: Problem, size: str | None) -> dict[str, Any]:
    """The constant overrides of a size preset; `{}` for the default size."""
    if size is None or (size == DEFAULT_SIZE and size not in problem.sizes):
        return {}
    if size not in problem.sizes:
        available = ", ".join([DEFAULT_SIZE, *problem.sizes])
        raise ProblemLoadError(f"{problem.origin}: unknown size {size!r} (available: {available})")
    return dict(problem.sizes[size])


AST_LOCK = threading.Lock()
"""Held by every parse of Python source and every compile of a tree in the project: CPython
3.11 keeps the recursion depth of its conversions between C and Python syntax trees in state that
threads share, so two at once can raise `SystemError: AST constructor recursion depth mismatch`
(CI, Python 3.11.7: threads loading the suite). Batches parse candidates in threads (the static
screen, build preparation, cache keys)."""


def parse_python(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse` under AST_LOCK."""
    with AST_LOCK:
        return ast.parse(source, filename=filename, mode=mode)


def parse_source(source: str, filename: str) -> ast.Module:
    """Parse source text, turning a syntax error into a one-line `ProblemLoadError`."""
    try:
        return parse_python(source, filename)
    except SyntaxError as exc:
        raise ProblemLoadError(f"{filename}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except ValueError as exc:  # e.g. null bytes in the source
        raise ProblemLoadError(f"{filename}: cannot parse: {exc}") from exc


def _override_assignments(tree: ast.Module, overrides: dict[str, Any], filename: str) -> ast.Module:
    """Replace the value of each top-level `NAME = ...` named in `overrides`."""
    if not overrides:
        return tree
    found: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else [])
        names = {t.id for t in targets if isinstance(t, ast.Name)} & overrides.keys()
        if not names:
            continue
        if len(targets) != 1 or len(names) != 1:
            raise ProblemLoadError(f"{filename}:{node.lineno}: size override of {sorted(names)} "
                                   "needs a plain `NAME = value` assignment")
        (target,) = names
        node.value = ast.copy_location(_literal_node(overrides[target]), node.value)
        found.add(target)
    unknown = sorted(overrides.keys() - found)
    if unknown:
        raise ProblemLoadError(f"{filename}: size preset sets {', '.join(unknown)}, "
                               "which the file does not assign at module level")
    return ast.fix_missing_locations(tree)


def _literal_node(value: Any) -> ast.expr:
    """An expression node that evaluates to `value` (a literal from `SIZES`)."""
    return parse_python(repr(value), mode="eval").body


def _where(exc: BaseException, filename: str) -> str:
    """`FILE:LINE` of the deepest frame inside the problem's own source, else `FILE`."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return f"{filename}:{exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return f"{filename}:{frames[-1].lineno}" if frames else filename


def _describe(exc: BaseException) -> str:
    """One line: the kind of failure and the exception's own first line."""
    first = (str(exc).strip().splitlines() or [""])[0]
    if isinstance(exc, ImportError):
        return f"import error: {first}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
