"""PNG figures for reports. They draw numbers they are given; computing them is metrics' job.

Each figure has a title, labelled axes with units, a legend and, where a figure is an estimate,
its bootstrap confidence band, so a plot reads without the text around it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

DPI = 110


@dataclass(frozen=True)
class Series:
    """One line: points (x, y) with the interval [lo, hi] around each y."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    lo: Sequence[float] = ()
    hi: Sequence[float] = ()


def _panels(count: int, width: float = 4.6, height: float = 3.6):
    fig, axes = plt.subplots(1, max(count, 1), figsize=(width * max(count, 1), height),
                             squeeze=False)
    return fig, list(axes[0])


def _save(fig, path: Path, title: str) -> Path:
    fig.suptitle(title, fontsize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")


def line_panels(panels: Mapping[str, Sequence[Series]], path: Path, title: str,
                xlabel: str | Mapping[str, str], ylabel: str, percent: bool = True,
                xlog: bool = False, marker: str = "o", empty: str = "no data") -> Path:
    """One panel per key, one line (with its shaded CI band) per series.

    `xlabel` may differ per panel (a mapping by panel key); `empty` is said in a panel with no line.
    """
    fig, axes = _panels(len(panels))
    for ax, (name, series) in zip(axes, panels.items()):
        drawn = False
        for s in series:
            points = [(x, y) for x, y in zip(s.x, s.y) if not math.isnan(y)]
            if not points:
                continue
            scale = 100 if percent else 1
            ax.plot([p[0] for p in points], [p[1] * scale for p in points], marker=marker,
                    markersize=3, label=s.label)
            if s.lo:
                ax.fill_between(s.x, [v * scale for v in s.lo], [v * scale for v in s.hi],
                                alpha=0.2)
            drawn = True
        if not drawn:
            _empty(ax, empty)
        ax.set(title=name, xlabel=xlabel if isinstance(xlabel, str) else xlabel[name],
               ylabel=ylabel)
        if percent:
            ax.set_ylim(-3, 103)
        if xlog:
            ax.set_xscale("log")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8)
    return _save(fig, path, title)


def _minor_label(value: float, _pos: object) -> str:
    """Label 2x, 3x, 5x (and 0.2x, 20x...) between the decades of a log axis."""
    mantissa = round(value / 10 ** math.floor(math.log10(value)), 6)
    return f"{value:g}x" if mantissa in (2, 3, 5) else ""


def box_panels(panels: Mapping[str, Mapping[str, Sequence[float]]], path: Path, title: str,
               ylabel: str) -> Path:
    """One panel per key (a level), one box per label (a run); log y axis, a line at 1x."""
    fig, axes = _panels(len(panels))
    for ax, (name, groups) in zip(axes, panels.items()):
        filled = {k: v for k, v in groups.items() if len(v)}
        if filled:
            ax.boxplot(list(filled.values()), showmeans=True)
            ax.set_xticks(range(1, len(filled) + 1),
                          [f"{k}\n(n={len(v)})" for k, v in filled.items()], fontsize=8,
                          rotation=20)
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
            ax.yaxis.set_minor_formatter(FuncFormatter(_minor_label))
            ax.axhline(1.0, color="0.5", linestyle="--", linewidth=1, label="baseline (1x)")
            ax.legend(fontsize=8)
        else:
            _empty(ax, "no correct, timed kernels")
        ax.set(title=name, ylabel=ylabel)
        ax.grid(alpha=0.3, axis="y")
    return _save(fig, path, title)


def stacked_shares(rows: Mapping[str, Mapping[str, int]], order: Sequence[str], path: Path,
                   title: str) -> Path:
    """Horizontal bars, one per row (a run), split by category (a status) as % of the row."""
    fig, ax = plt.subplots(figsize=(10, 1.6 + 0.45 * max(len(rows), 1)))
    colors = plt.get_cmap("tab10")
    labels = list(rows)
    left = [0.0] * len(labels)
    for c, category in enumerate(order):
        widths = [100 * rows[r].get(category, 0) / max(sum(rows[r].values()), 1) for r in labels]
        if any(widths):
            ax.barh(labels, widths, left=left, label=category, color=colors(c % 10))
            left = [a + b for a, b in zip(left, widths)]
    ax.set(xlabel="share of attempts (%)", xlim=(0, 100))
    ax.invert_yaxis()
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), title="status")
    return _save(fig, path, title)
