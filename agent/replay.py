"""Recorded responses for the `replay:` model, keyed by (problem, index, turn).

A replay book is the data behind `make_client("replay:SOURCE")`: the client looks a response up
here and then sends it through litellm like any other completion, so offline runs and tests
exercise the real client path. SOURCE is either a JSONL file, one object a line::

    {"problem": "level1/19_relu", "index": 0, "turn": 0, "response": "<raw model text>"}

(other fields, such as a `note`, are allowed and ignored), or a stored run directory, whose
attempts' raw responses are replayed, so a run can be re-evaluated on new hardware.

This module does not import litellm; its errors are plain `ReplayError`s that `agent.llm`
turns into `LLMError`s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple


class ReplayKey(NamedTuple):
    """Which response a call asks for; real models ignore it."""

    problem: str
    """Problem id, e.g. `level1/19_relu`."""
    index: int
    """Trajectory index (refinement) or sample index (sampling)."""
    turn: int
    """0-based turn within the trajectory (0 for samples)."""

    def describe(self) -> str:
        return f"(problem={self.problem!r}, index={self.index}, turn={self.turn})"


class ReplayError(ValueError):
    """A replay source that cannot be read, or a key it does not hold."""


class ReplayBook:
    """Responses by key, read once from a JSONL file or a run directory."""

    def __init__(self, responses: dict[ReplayKey, str], source: str):
        self.responses = responses
        self.source = source

    @classmethod
    def load(cls, source: str | Path) -> ReplayBook:
        """Read SOURCE: a directory is a stored run, anything else a JSONL file."""
        path = Path(source)
        if path.is_dir():
            return cls(_read_run_dir(path), str(path))
        if not path.is_file():
            raise ReplayError(f"replay source {path} does not exist (expected a .jsonl file "
                              "or a run directory)")
        return cls(_read_jsonl(path), str(path))

    def response(self, key: ReplayKey) -> str:
        """The recorded text for KEY; a clear error naming the key and the source when absent."""
        try:
            return self.responses[ReplayKey(*key)]
        except KeyError:
            raise ReplayError(
                f"replay source {self.source} has no response for {ReplayKey(*key).describe()}; "
                f"it holds {len(self.responses)} responses"
                + (f" for problems {sorted({k.problem for k in self.responses})[:5]}"
                   if self.responses else "")
            ) from None

    def __len__(self) -> int:
        return len(self.responses)


def _read_jsonl(path: Path) -> dict[ReplayKey, str]:
    responses: dict[ReplayKey, str] = {}
    first_line: dict[ReplayKey, int] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            key, text = _parse_line(line, path, number)
            if key in responses:
                raise ReplayError(f"{path}:{number}: duplicate entry {key.describe()} "
                                  f"(first on line {first_line[key]})")
            responses[key] = text
            first_line[key] = number
    return responses


def _parse_line(line: str, path: Path, number: int) -> tuple[ReplayKey, str]:
    where = f"{path}:{number}"
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as e:
        raise ReplayError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(entry, dict):
        raise ReplayError(f"{where}: expected a JSON object, got {type(entry).__name__}")
    expected = {"problem": str, "index": int, "turn": int, "response": str}
    for field, kind in expected.items():
        value = entry.get(field)
        if not isinstance(value, kind) or isinstance(value, bool):
            got = "missing" if field not in entry else f"{type(value).__name__} {value!r:.40}"
            raise ReplayError(f"{where}: field {field!r} must be {kind.__name__}, got {got}")
    if entry["index"] < 0 or entry["turn"] < 0:
        raise ReplayError(f"{where}: index and turn must be >= 0")
    return ReplayKey(entry["problem"], entry["index"], entry["turn"]), entry["response"]


def _read_run_dir(path: Path) -> dict[ReplayKey, str]:
    from agent.store import RunStore  # the store is only needed for this form

    try:
        attempts = RunStore.open(path).attempts()
    except FileNotFoundError as e:
        raise ReplayError(f"replay source {path}: {e}") from None
    return {ReplayKey(a.candidate.problem_id, a.candidate.index, a.candidate.turn):
            a.candidate.response for a in attempts}
