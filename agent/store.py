"""The run store: `runs/<timestamp>_<name>_<id>/` with config.json and attempts.sqlite.

One row per attempt, written (and committed) as soon as the attempt finishes, so a crash loses
nothing already evaluated. `experiments/` reads runs only through this module.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from pathlib import Path

from agent.records import Attempt, RunRecord, Trajectory

CONFIG = "config.json"
DATABASE = "attempts.sqlite"
CHECKPOINTS = "checkpoints.sqlite"
"""LangGraph's checkpoints (graph position of every trajectory), next to the attempts."""
LOG = "run.log"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS attempts (
    problem_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    turn INTEGER NOT NULL,
    status TEXT,
    speedup_eager REAL,
    speedup_compile REAL,
    attempt_json TEXT NOT NULL,
    written_at REAL NOT NULL,
    PRIMARY KEY (problem_id, idx, turn)
);
"""


def checkpoint_types() -> list[type]:
    """The project's own record types that trajectory state holds, which LangGraph's checkpoint
    serializer may rebuild on resume (every other type is refused rather than unpickled)."""
    import enum
    import inspect

    from pydantic import BaseModel

    import agent.records
    import feedback.result
    import problems.record

    return [obj for module in (agent.records, feedback.result, problems.record)
            for obj in vars(module).values()
            if inspect.isclass(obj) and obj.__module__ == module.__name__
            and issubclass(obj, (BaseModel, enum.Enum))]


def new_run_dir(root: Path, name: str) -> Path:
    """A fresh run directory name: `<UTC timestamp>_<name>_<random id>`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(root) / f"{stamp}_{name}_{secrets.token_hex(3)}"


class RunStore:
    """Reads and writes one run directory."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def create(cls, path: Path, record: RunRecord) -> RunStore:
        """Make the directory and write config.json (refuses to overwrite another run)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = path / CONFIG
        if config.exists():
            existing = RunRecord.model_validate_json(config.read_text())
            if existing.run_id != record.run_id:
                raise FileExistsError(f"{path} already holds run {existing.run_id}")
        config.write_text(record.model_dump_json(indent=2))
        store = cls(path)
        store._connect().close()
        return store

    @classmethod
    def open(cls, path: Path) -> RunStore:
        """Open an existing run directory (clear error when it is not one)."""
        path = Path(path)
        if not (path / CONFIG).is_file():
            raise FileNotFoundError(f"{path} is not a run directory (no {CONFIG})")
        return cls(path)

    def record(self) -> RunRecord:
        return RunRecord.model_validate_json((self.path / CONFIG).read_text())

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path / DATABASE, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(_SCHEMA)
        return conn

    def write_attempt(self, attempt: Attempt, *, replace: bool = True) -> None:
        """Insert one attempt. Writing the same (problem, index, turn) again replaces it, or,
        with `replace=False`, leaves the stored one (and its `written_at`) as it is."""
        c, r = attempt.candidate, attempt.result
        with self._connect() as conn:
            conn.execute(
                f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO attempts "
                "VALUES (?,?,?,?,?,?,?,?)",
                (c.problem_id, c.index, c.turn, r.status.value if r else "no_code",
                 r.speedup_eager if r else None, r.speedup_compile if r else None,
                 attempt.model_dump_json(), time.time()),
            )

    def attempts(self, problem_id: str | None = None) -> list[Attempt]:
        """All attempts, ordered by problem, index, turn."""
        query = "SELECT attempt_json FROM attempts"
        args: tuple = ()
        if problem_id is not None:
            query += " WHERE problem_id = ?"
            args = (problem_id,)
        with self._connect() as conn:
            rows = conn.execute(query + " ORDER BY problem_id, idx, turn", args).fetchall()
        return [Attempt.model_validate(json.loads(row[0])) for row in rows]

    def attempt(self, problem_id: str, index: int, turn: int) -> Attempt | None:
        """The stored attempt at one (problem, index, turn), if any."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT attempt_json FROM attempts WHERE problem_id = ? AND idx = ? AND turn = ?",
                (problem_id, index, turn)).fetchone()
        return Attempt.model_validate(json.loads(row[0])) if row else None

    def trajectories(self, margin: float = 0.0) -> list[Trajectory]:
        """Attempts grouped by (problem, index), each with its best-so-far per turn."""
        groups: dict[tuple[str, int], list[Attempt]] = {}
        for a in self.attempts():
            groups.setdefault((a.candidate.problem_id, a.candidate.index), []).append(a)
        return [Trajectory.from_attempts(group, margin) for group in groups.values()]

    def written_at(self) -> dict[tuple[str, int, int], float]:
        """When each attempt was stored (UNIX seconds), by (problem, index, turn): the end of
        its turn, for timing the loop itself (experiments/bench/scheduler.py)."""
        with self._connect() as conn:
            return {(p, i, t): w for p, i, t, w in
                    conn.execute("SELECT problem_id, idx, turn, written_at FROM attempts")}

    def done_keys(self) -> set[tuple[str, int, int]]:
        """(problem, index, turn) of every stored attempt: what a resume must not redo."""
        with self._connect() as conn:
            return {tuple(r) for r in conn.execute("SELECT problem_id, idx, turn FROM attempts")}
