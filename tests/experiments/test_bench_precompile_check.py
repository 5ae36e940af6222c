"""The precompile check runs the real build ahead and the real `compiled` time job, and says what
the build launched and where the job's seconds went."""

from __future__ import annotations

import json

import pytest

from experiments.bench.precompile_check import main

pytestmark = pytest.mark.slow  # inductor's C++ builds


def test_each_problem_is_built_ahead_then_timed_by_its_job(tmp_path, monkeypatch):
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):  # the check sets its own
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "check.jsonl"
    assert main(["--backend", "cpp", "--size", "small", "--problems", "level1/19_relu",
                 "--out", str(out)]) == 0
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["problem"] == "level1/19_relu" and row["built"] is True
    assert row["job"]["status"] == "ok", row["job"]
    assert {"precompile", "compile"} <= set(row["job"]["phases"])
