"""Kernels written elsewhere, read for re-scoring: a folder in KernelBench's run layout or a JSONL.

    RUN_FOLDER/level_{L}_problem_{P}_sample_{S}_kernel.py     (KernelBench's `runs/<name>/`)
    FILE.jsonl: one {"problem": ..., "kernel": ...} object a line (optional "sample": S)

A folder's file answers the problem of level L and number P among those selected; a JSONL line's
`problem` is a problem id (`level1/19_relu`), `levelL/P`, or anything `problems.spec.matches`
accepts that names exactly one of them. Every mistake is a `SubmissionError` with one line naming
the file (and line) and what is wrong, raised before anything is evaluated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from problems.record import Problem
from problems.spec import matches

KERNEL_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
"""A kernel file of KernelBench's run layout: level, problem number, sample index."""


class SubmissionError(ValueError):
    """Input that cannot be re-scored: missing path, malformed line, unknown problem."""


@dataclass(frozen=True)
class Submission:
    """One kernel to evaluate, and where it came from."""

    problem: Problem
    index: int
    """Sample index: S of the file name, a line's `sample`, else its order among the problem's."""
    code: str
    origin: str
    """`FILE` or `FILE.jsonl:LINE`."""


def read_submissions(source: Path, problems: Sequence[Problem]) -> list[Submission]:
    """Every kernel of `source` with its problem, in a stable order (raises SubmissionError)."""
    source = Path(source)
    if not source.exists():
        raise SubmissionError(f"{source}: no such folder or JSONL file")
    found = _from_folder(source, problems) if source.is_dir() else _from_jsonl(source, problems)
    if not found:
        raise SubmissionError(f"{source}: no kernels (expected level_L_problem_P_sample_S_kernel.py "
                              "files, or JSONL lines {\"problem\": ..., \"kernel\": ...})")
    seen: dict[tuple[str, int], str] = {}
    for s in found:
        other = seen.setdefault((s.problem.id, s.index), s.origin)
        if other != s.origin:
            raise SubmissionError(f"{s.origin}: sample {s.index} of {s.problem.id} is also given "
                                  f"by {other}")
    return found


def _from_folder(folder: Path, problems: Sequence[Problem]) -> list[Submission]:
    by_number = {(p.level, p.number): p for p in problems}
    found, unknown = [], []
    for path in sorted(folder.iterdir()):
        match = KERNEL_FILE.match(path.name)
        if not match or not path.is_file():
            continue
        level, number, sample = map(int, match.groups())
        problem = by_number.get((level, number))
        if problem is None:
            unknown.append(path.name)
            continue
        found.append(Submission(problem, sample, _read(path), str(path)))
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise SubmissionError(f"{folder}: no problem for {', '.join(unknown[:3])}{more} among "
                              "the problems selected with --problems")
    return found


def _from_jsonl(path: Path, problems: Sequence[Problem]) -> list[Submission]:
    found: list[Submission] = []
    counts: dict[str, int] = {}
    for number, line in enumerate(_read(path).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SubmissionError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
                                  ) from None
        if not isinstance(row, dict) or not isinstance(row.get("problem"), str) \
                or not isinstance(row.get("kernel"), str):
            raise SubmissionError(f"{where}: expected an object with string fields \"problem\" "
                                  "and \"kernel\"")
        sample = row.get("sample")
        if sample is not None and (not isinstance(sample, int) or sample < 0):
            raise SubmissionError(f"{where}: \"sample\" must be a non-negative integer")
        problem = _problem_named(row["problem"], problems, where)
        index = sample if sample is not None else counts.get(problem.id, 0)
        counts[problem.id] = max(counts.get(problem.id, 0), index + 1)
        found.append(Submission(problem, index, row["kernel"], where))
    return found


def _problem_named(name: str, problems: Sequence[Problem], where: str) -> Problem:
    exact = [p for p in problems if p.id == name]
    chosen = exact or [p for p in problems if matches(p, name)]
    if len(chosen) != 1:
        why = "no problem" if not chosen else f"{len(chosen)} problems"
        raise SubmissionError(f"{where}: {why} among those selected with --problems matches "
                              f"{name!r} (give an id such as {problems[0].id!r})" if problems
                              else f"{where}: no problems selected")
    return chosen[0]


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SubmissionError(f"{path}: cannot read ({exc})") from None
