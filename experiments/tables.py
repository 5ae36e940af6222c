"""Plain-text tables: Markdown for reports, also readable when printed to a terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence

from experiments.metrics import Score


def fmt(value: object, digits: int = 3) -> str:
    """A cell: `-` for None/NaN, floats rounded, everything else as str."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"
    return str(value)


def fmt_score(score: Score, percent: bool = True) -> str:
    """`62% (5/8) [38-88]`: value, hits over the denominator, 95% bootstrap interval."""
    if math.isnan(score.value):
        return f"- (0/{score.denominator})"
    if percent:
        value = f"{score.value * 100:.0f}%"
        ci = f" [{score.low * 100:.0f}-{score.high * 100:.0f}]"
    else:
        value = f"{score.value:.2f}x"
        ci = f" [{score.low:.2f}-{score.high:.2f}]"
    if math.isnan(score.low):
        ci = ""
    return f"{value} ({score.numerator:g}/{score.denominator}){ci}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table with cells formatted by `fmt`."""
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = lambda items: "| " + " | ".join(s.ljust(w) for s, w in zip(items, widths)) + " |"
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in cells])
