"""An unseen extra size for the correctness check (issue 4, class 11: shape specialisation).

A candidate that hard-codes the evaluated shapes (a loop bound of 1024, a grid sized for 16 rows,
a result table keyed by shape) passes every trial at that size. So after the regular trials the
correct job builds the problem once more at a size nobody told the candidate about, and runs one
more trial there.

Which size: the problem's size knobs are the module constants its presets override (`SIZES`: the
author declared them scalable). Each positive integer knob `v` at the evaluated size moves by `r *
gcd(v, 16)` with a secret `r` in {1, 2}: a different shape, the same alignment to 16 (a kernel that
needs multiples of 4 or 16 is honest at the evaluated size and stays honest here). Up or down: a
knob that cannot go down (`v <= r * gcd(v, 16)`, such as a batch of 16) goes up one step, and each
other knob goes up one step or down a whole number of them, whichever brings the product of the
knobs' ratios nearest `TARGET` (1.25) while staying above 1, so the unseen size has a few more
elements than the evaluated one, not many more. Moving every
knob up made a batch of 16 and 64 channels 3 and 1.5 times larger: level1/26's trial, 5 times the
evaluated memory, ran out of an 80 GB GPU with the float64 reference beside it. When the reference
cannot run there (knobs with constraints between them: channels and groups, a width and heads), the
other step is tried, then the other presets; a problem without presets gets no extra size (the
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
TARGET = 1.25
"""The product of the knobs' ratios that `moved` aims at: above 1, so that a kernel written for
a fixed number of elements leaves some undone (below 1 it would compute every element and write
past the end unseen), and not far above it, for memory."""


def knobs(problem: Problem) -> list[str]:
    """Constants some preset overrides, in a stable order."""
    return sorted({name for preset in problem.sizes.values() for name in preset})


def _step(value: Any, r: int) -> int:
    """`r * gcd(v, 16)` for a positive int knob, 0 for anything else (not moved)."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return 0
    return r * math.gcd(value, 16)


def moved(values: dict[str, Any], r: int) -> dict[str, Any]:
    """Every knob moved (module docstring): those that can only go up first, by their step; then
    the others, the coarsest step first, each up one step or down a whole number of them,
    whichever brings the product of new / old nearest `TARGET` while the knobs after it can
    still take it above 1 (going up: always possible)."""
    out, ratio = dict(values), 1.0
    steps = {n: _step(v, r) for n, v in values.items()}
    order = sorted((n for n in values if steps[n]),
                   key=lambda n: (values[n] > steps[n], -steps[n] / values[n]))
    for i, name in enumerate(order):
        v, step = values[name], steps[name]
        room = math.prod((values[n] + steps[n]) / values[n] for n in order[i + 1:])
        options = [o for o in (v + step, *range(v - step, 0, -step)) if ratio * o / v * room > 1]
        out[name] = min(options, key=lambda new: abs(math.log(ratio * new / v / TARGET)))
        ratio *= out[name] / v
    return out


def candidates(problem: Problem, size: str | None) -> Iterator[tuple[str, Problem]]:
    """(description, problem with an `EXTRA` preset) for each extra size worth trying, best first."""
    names = knobs(problem)
    if not names:
        return
    module = load_module(problem, size)
    current = {n: getattr(module, n) for n in names if hasattr(module, n)}
    r = 1 + secrets.randbelow(2)
    tried = [current]
    for step in (r, 3 - r):  # the other step where the knobs constrain each other (groups, heads)
        extra = moved(current, step)
        if extra not in tried:
            tried.append(extra)
            yield _describe(extra, current), _with(problem, extra)
    for name, preset in problem.sizes.items():
        if name != size and name != EXTRA:
            values = {**current, **preset}
            if values != current:
                yield f"the `{name}` preset ({_describe(values, current)})", _with(problem, preset)


def _with(problem: Problem, preset: dict[str, Any]) -> Problem:
    return problem.model_copy(update={"sizes": {**problem.sizes, EXTRA: dict(preset)}})


def _describe(values: dict[str, Any], before: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items() if before.get(k) != v)
