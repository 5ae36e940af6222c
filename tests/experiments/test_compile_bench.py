"""The compile benchmark's record: written after every build, so a cut run keeps what it built
(H200, 2026-12-03: a run stopped at its time limit left nothing)."""

from __future__ import annotations

import json

import pytest

from experiments.bench import compile_bench


def test_each_build_is_written_as_it_finishes_and_a_cut_run_keeps_them(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("# a\n")
    (tmp_path / "b.py").write_text("# b\n")
    out = tmp_path / "cb.json"
    seen: list[dict] = []

    def build(candidate, ext, settings, stock_arch):
        if out.exists():
            seen.append(json.loads(out.read_text()))
        if len(seen) == 5:  # the time limit, in the middle of the second candidate
            raise KeyboardInterrupt
        return {"ok": True, "wall_s": 2.0 if settings is None else 1.0, "cpu_s": 3.0,
                "error": None}
    monkeypatch.setattr(compile_bench, "run_build_child", build)
    with pytest.raises(KeyboardInterrupt):
        compile_bench.main(["--candidates", str(tmp_path), "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["complete"] is False and len(record["pch_setup"]) == 2
    assert [(r["candidate"], r["arm"]) for r in record["runs"]] == [("a.py", "stock")]
    assert record["summary"]["stock"]["cold_wall_s"] == 2.0 and record["summary"]["fast"]["builds"] == 0
    # on disk before each next build: the second setup, then a's stock builds once both ended
    assert [(len(s["pch_setup"]), len(s["runs"])) for s in seen] == [(1, 0), (2, 0), (2, 0),
                                                                      (2, 1), (2, 1)]

    monkeypatch.setattr(compile_bench, "run_build_child", lambda *a: {
        "ok": True, "wall_s": 1.0, "cpu_s": 1.0, "error": None})
    assert compile_bench.main(["--candidates", str(tmp_path), "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["complete"] is True and len(record["runs"]) == 4 and record["total_s"] >= 0
    assert "compile_bench --candidates" in record["command"]


def test_fastbuild_against_its_serial_nvcc_with_builds_at_once(tmp_path, monkeypatch):
    """`--versus serial-nvcc --concurrency 2`: the first arm is fastbuild with parallel_nvcc off,
    the PCHs come from fastbuild.prepare (no set-up builds), builds overlap, arms alternate."""
    import threading
    import time

    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.py").write_text(f"# {name}\n")
    out = tmp_path / "cb.json"
    prepared, settings_seen, running, most = [], [], [0], [0]
    lock = threading.Lock()

    def build(candidate, ext, settings, stock_arch):
        with lock:
            settings_seen.append((candidate.name, settings.get("parallel_nvcc", True)))
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return {"ok": True, "wall_s": 1.0, "cpu_s": 1.0, "error": None}
    monkeypatch.setattr(compile_bench, "run_build_child", build)
    monkeypatch.setattr(compile_bench.fastbuild, "prepare",
                        lambda code, backend, cache: prepared.append(code))
    assert compile_bench.main(["--candidates", str(tmp_path), "--out", str(out), "--versus",
                               "serial-nvcc", "--concurrency", "2"]) == 0
    record = json.loads(out.read_text())
    assert prepared == ["# a\n", "# b\n", "# c\n"] and len(record["pch_setup"]) == 1
    assert record["versus"] == "serial-nvcc" and record["concurrency"] == 2 and most[0] == 2
    arms = {(r["candidate"], r["arm"]) for r in record["runs"]}
    assert arms == {(c, a) for c in ("a.py", "b.py", "c.py") for a in ("stock", "fast")}
    assert sorted(settings_seen) == sorted([(c, p) for c in ("a.py", "b.py", "c.py")
                                            for p in (False, False, True, True)])
    assert "fastbuild, nvcc serial" in compile_bench.markdown(record)
