"""The report from a fixture run store (FABRICATED results, see conftest.py)."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np
import pytest

from experiments import metrics as m
from experiments import report
from experiments.runs import load_run
from experiments.tables import fmt_score

PROBLEMS = ["level1/1_a", "level1/2_b", "level2/1_c"]
SPEC = "fixture:not-a-spec"   # unresolvable on purpose: problems come from the store


def _refine_attempts(attempt, feedback_gain: float):
    """Turn t of problem j: compile error at turn 0, then speedups growing with the turn."""
    rows = []
    for j, pid in enumerate(PROBLEMS):
        for t in range(4):
            if t == 0 or (pid == "level1/2_b" and t == 3):
                rows.append(attempt(pid, 0, t, status="compile_error" if t == 0 else "mismatch",
                                    cost=None if pid == "level2/1_c" else 0.01))
            elif pid == "level2/1_c" and t == 2:
                continue  # a missing attempt: must count as a failure
            else:
                rows.append(attempt(pid, 0, t, eager=0.5 + feedback_gain * t * (j + 1),
                                    compile=0.4 + feedback_gain * t))
    return rows


@pytest.fixture
def fixture_runs(tmp_path, attempt, store_factory):
    paths = []
    for name, gain in (("G", 0.1), ("G+E+P", 0.4)):
        config = {"name": f"fixture-{name}", "model": "fixture", "feedback": name, "turns": 4,
                  "trajectories": 1, "backend": "cpp", "problems": SPEC}
        store_factory(tmp_path / name, "refine", config, _refine_attempts(attempt, gain),
                      run_id=f"r-{name}")
        paths.append(tmp_path / name)
    samples = [attempt(pid, i, 0, status="ok" if i % 2 else "runtime_error", eager=1.2 + i)
               for pid in PROBLEMS for i in range(4)]
    store_factory(tmp_path / "S", "sample", {"name": "fixture-k4", "model": "fixture", "k": 4,
                                             "backend": "cpp", "problems": SPEC},
                  samples, run_id="r-S")
    return paths + [tmp_path / "S"]


def test_report_figures_and_tables(fixture_runs, tmp_path):
    out = tmp_path / "report"
    stats = report.Stats(resamples=200, seed=1)
    md = report.build(fixture_runs, out, stats).read_text()
    html = (out / "report.html").read_text()
    for png in ("fast_p_vs_p", "fast1_at_n", "budget", "speedups", "failures"):
        image = mpimg.imread(out / f"{png}.png")
        assert image.shape[0] >= 300 and image.shape[1] >= 600, png
        assert float(np.var(image[..., :3])) > 1e-3, f"{png} looks blank"
        assert f"{png}.png" in md and f'src="{png}.png"' in html

    runs = [load_run(p) for p in fixture_runs]
    names = report.labels(runs)
    assert names == ["refine G N=4", "refine G+E+P N=4", "sample k=4"]
    # Every fast_p cell equals the metric function's number, formatted.
    for baseline in ("eager", "compile"):
        rows = report.fast_p_rows(runs, names, baseline, stats)
        for run, name in zip(runs, names):
            for level, layout in run.by_level().items():
                row = next(r for r in rows if r[0] == name and r[1] == level)
                for p, cell in zip(report.P_TABLE, row[3:]):
                    expected = m.fast_p_final(run.grid, layout, p, baseline, 0.0, 200, 1)
                    assert cell == fmt_score(expected)
                    assert f" {cell} " in md
    # A hand-checked number: G+E+P, all levels, fast_1 vs eager after 4 turns.
    # a: speedups 0.9, 1.3, 1.7 -> fast; b: 1.3, 2.1 then mismatch -> fast; c: turn 1 = 1.7 -> fast.
    gep = runs[1]
    assert m.fast_p_final(gep.grid, gep.layout, 1.0).value == 1.0
    # G: a: 0.6..0.8 no; b: 0.7, 0.9 no; c: 0.8, (missing), 1.4 -> yes = 1/3.
    assert m.fast_p_final(runs[0].grid, runs[0].layout, 1.0).value == pytest.approx(1 / 3)
    assert "missing" in md and "unknown (1 unpriced calls)" in md


def test_report_cli(fixture_runs, tmp_path, capsys):
    assert report.main([str(p) for p in fixture_runs[:1]] + ["--out", str(tmp_path / "r"),
                                                             "--resamples", "50"]) == 0
    assert (tmp_path / "r" / "report.html").is_file()
    assert "wrote" in capsys.readouterr().out


def test_labels_name_what_differs(tmp_path, attempt, store_factory):
    config = {"model": "fixture", "feedback": "G", "turns": 1, "problems": SPEC}
    for name in ("a", "b"):
        store_factory(tmp_path / name, "refine", config, [attempt()], run_id=f"id-{name}")
    store_factory(tmp_path / "c", "refine", {**config, "feedback": "G+E"}, [attempt()], run_id="c")
    alike = [load_run(tmp_path / n) for n in ("a", "b")]
    assert report.labels(alike) == ["id-a", "id-b"]
    assert report.labels(alike[:1] + [load_run(tmp_path / "c")]) == ["G", "G+E"]
