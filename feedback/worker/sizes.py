"""An unseen extra size for the correctness check (issue 4, class 11: shape specialisation).

A candidate that hard-codes the evaluated shapes (a loop bound of 1024, a grid sized for 16 rows,
a result table keyed by shape) passes every trial at that size. So after the regular trials the
correct job builds the problem once more at a size nobody told the candidate about, and runs one
more trial there.

Which size: the problem's size knobs are the module constants its presets override (`SIZES`:
the author declared them scalable). Each integer knob `v` at the evaluated size becomes
`v + r * gcd(v, 16)` with a secret `r` in {1, 2}: a different shape, the same alignment to 16
(a kernel that needs multiples of 4 or 16 is honest at the evaluated size and stays honest here),
about the same size for large `v`. When the reference cannot run there (knobs with constraints
between them), the other presets are tried; a problem without presets gets no extra size (the
report says so). Memory: at most one more input set and output, at about the evaluated size.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator
from typing import Any

from problems.module import load_module
from problems.record import Problem

EXTRA = "_kr_unseen"


def knobs(problem: Problem) -> list[str]:
    """Constants some preset overrides, in a stable order."""
    return sorted({name for preset in problem.sizes.values() for name in preset})


def bumped(value: Any, r: int) -> Any:
    """`v + r * gcd(v, 16)` for a positive int, the value itself otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return value
    return value + r * math.gcd(value, 16)


def candidates(problem: Problem, size: str | None) -> Iterator[tuple[str, Problem]]:
    """(description, problem with an `EXTRA` preset) for each extra size worth trying, best first."""
    names = knobs(problem)
    if not names:
        return
    module = load_module(problem, size)
    current = {n: getattr(module, n) for n in names if hasattr(module, n)}
    r = 1 + secrets.randbelow(2)
    moved = {n: bumped(v, r) for n, v in current.items()}
    if moved != current:
        yield _describe(moved, current), _with(problem, moved)
    for name, preset in problem.sizes.items():
        if name != size and name != EXTRA:
            values = {**current, **preset}
            if values != current:
                yield f"the `{name}` preset ({_describe(values, current)})", _with(problem, preset)


def _with(problem: Problem, preset: dict[str, Any]) -> Problem:
    return problem.model_copy(update={"sizes": {**problem.sizes, EXTRA: dict(preset)}})


def _describe(values: dict[str, Any], before: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if before.get(k) != v)
