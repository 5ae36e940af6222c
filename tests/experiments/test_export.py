"""Export round trips (FABRICATED results, see conftest.py)."""

from __future__ import annotations

import csv
import json

import pyarrow.parquet as pq

from experiments import export
from experiments.runs import load_run


def _run(tmp_path, attempt, store_factory):
    attempts = [attempt("level1/1_a", 0, 0, status="compile_error"),
                attempt("level1/1_a", 0, 1, eager=2.0, compile=1.5, noise=0.02),
                attempt("level2/3_c", 0, 0, status="no_code")]          # turn 1 of c missing
    store_factory(tmp_path / "run", "refine", {"turns": 2, "trajectories": 1,
                                               "problems": "fixture:none"}, attempts)
    return load_run(tmp_path / "run")


def test_rows_cover_every_asked_attempt(tmp_path, attempt, store_factory):
    rows = export.rows(_run(tmp_path, attempt, store_factory))
    assert [(r["problem_id"], r["turn"], r["status"]) for r in rows] == [
        ("level1/1_a", 0, "compile_error"), ("level1/1_a", 1, "ok"),
        ("level2/3_c", 0, "no_code"), ("level2/3_c", 1, "missing")]
    ok = rows[1]
    assert (ok["correct"], ok["speedup_eager"], ok["runtime_ms"], ok["level"]) == \
        (True, 2.0, 0.5, 1)
    assert rows[3]["prompt_tokens"] is None and rows[3]["correct"] is False
    assert all(list(r) == list(export.COLUMNS) for r in rows)


def test_round_trips(tmp_path, attempt, store_factory, capsys):
    run = _run(tmp_path, attempt, store_factory)
    rows = export.rows(run)
    for fmt in export.FORMATS:
        out = tmp_path / f"attempts.{fmt}"
        assert export.main([str(run.path), "--out", str(out)]) == 0
        if fmt == "jsonl":
            back = [json.loads(line) for line in out.read_text().splitlines()]
            assert back == rows
        elif fmt == "parquet":
            assert pq.read_table(out).to_pylist() == rows
        else:
            with out.open(newline="") as f:
                back = list(csv.DictReader(f))
            assert back == [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]
    assert "wrote 4 rows" in capsys.readouterr().out
