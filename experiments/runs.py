"""A stored run as the metrics see it: its record, the attempts it asked for, those it has.

The expected problems come from the run's own selection (`config["problems"]` through
`problems.spec.select`) joined with every problem seen in the store, so a problem the agent never
reached is a failure in every figure rather than a silently smaller denominator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from agent.records import Attempt, RunRecord
from agent.store import RunStore
from experiments.metrics import ConfirmedGrid, Grid, Layout

_LEVEL = re.compile(r"level(\d+)")


@dataclass(frozen=True)
class Run:
    """One run directory, loaded."""

    path: Path
    record: RunRecord
    layout: Layout
    grid: Grid
    levels: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    selection_resolved: bool = False

    @property
    def config(self) -> dict:
        return self.record.config

    @property
    def mode(self) -> str:
        return self.record.mode

    @property
    def noise_margin(self) -> float:
        return float(self.config.get("noise_margin") or 0.0)

    @property
    def budget_size(self) -> int:
        """N (turns) for refinement, k (samples) for sampling."""
        return self.layout.turns if self.mode == "refine" else self.layout.indices

    def attempts(self) -> list[Attempt]:
        return list(self.grid.values())

    def devices(self) -> list[str]:
        """Where the attempts were evaluated (several when a run was resumed elsewhere)."""
        return sorted({a.result.environment.device for a in self.grid.values()
                       if a.result is not None and a.result.environment is not None})

    def by_level(self) -> dict[str, Layout]:
        """The layout restricted to each level (`level1`...), plus `all`."""
        out: dict[str, Layout] = {}
        for level in sorted(set(self.levels.values())):
            problems = tuple(p for p in self.layout.problems if self.levels[p] == level)
            out[f"level{level}" if level else "level?"] = Layout(
                self.layout.mode, problems, self.layout.indices, self.layout.turns)
        out["all"] = self.layout
        return out


def level_of(problem_id: str) -> int:
    """The level named in a problem id (`level2/12_x` -> 2); 0 when it names none."""
    found = _LEVEL.search(problem_id)
    return int(found.group(1)) if found else 0


def selected_problems(spec: str | None) -> tuple[dict[str, int], str | None]:
    """Problem id -> level for a selection spec, or ({}, why) when it cannot be resolved here."""
    if not spec:
        return {}, "the run records no problem spec"
    try:
        from problems.spec import select

        return {p.id: p.level for p in select(spec).problems}, None
    except Exception as exc:  # noqa: BLE001 - a path of another machine, a broken install
        return {}, f"problem spec {spec!r} not resolved here ({exc}); using problems in the store"


def layout_of(record: RunRecord, problems: tuple[str, ...], keys: set[tuple[str, int, int]],
              ) -> tuple[Layout, list[str]]:
    """Expected indices and turns from the config; falls back to what the store holds."""
    config, notes = record.config, []
    seen_indices = 1 + max((i for _, i, _ in keys), default=0)
    seen_turns = 1 + max((t for _, _, t in keys), default=0)
    if record.mode == "refine":
        indices = config.get("trajectories") or 1
        turns = config.get("turns")
        if not turns:
            turns = seen_turns
            notes.append(f"config has no `turns`; using {turns} seen in the store")
        return Layout("refine", problems, int(indices), int(turns)), notes
    if record.mode == "sample":
        k = config.get("k")
        if not k:
            k = seen_indices
            notes.append(f"config has no `k`; using {k} seen in the store")
        return Layout("sample", problems, int(k), 1), notes
    raise ValueError(f"unknown run mode {record.mode!r} (expected refine or sample)")


def load_run(path: Path) -> Run:
    """Open a run directory and gather what the metrics need."""
    store = RunStore.open(path)
    record = store.record()
    grid = {(a.candidate.problem_id, a.candidate.index, a.candidate.turn): a
            for a in store.attempts()}
    levels, why = selected_problems(record.config.get("problems"))
    notes = [why] if why else []
    for problem_id, _, _ in grid:
        levels.setdefault(problem_id, level_of(problem_id))
    layout, more = layout_of(record, tuple(levels), set(grid))
    extra = sorted(set(grid) - set(layout.asked()))
    if extra:
        more.append(f"{len(extra)} stored attempts lie outside the asked-for grid and are ignored")
    from experiments.confirm import load_confirmations

    grid = ConfirmedGrid(grid, load_confirmations(Path(path)))
    return Run(Path(path), record, layout, grid, levels, tuple(notes + more), why is None)


def finished(path: Path) -> bool:
    """Whether every asked-for attempt of a run is stored (an unresolvable spec counts as not)."""
    run = load_run(path)
    return run.selection_resolved and set(run.layout.asked()) <= set(run.grid)
