"""The scheduler benchmark end to end on a tiny sweep (3 problems x 2 turns): the report's shape,
and that its GPU-busy share is the gates' own busy / wall. SIMULATED: no kernel is evaluated."""

from __future__ import annotations

import json

import pytest

from experiments.bench import scheduler


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("sched") / "s.json"
    assert scheduler.main(["--problems", "3", "--turns", "2", "--concurrency", "3",
                           "--zero-problems", "3", "--llm-latency", "0", "--compile-s", "0.05",
                           "--gpu-s", "0.05",
                           "--compile-workers", "2", "--device", "cpu", "--log-format", "json",
                           "--per-turn", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_report_structure(report, capsys):
    assert set(report["arms"]) == {"zero", "costs"}
    for arm in report["arms"].values():
        assert arm["turns"] == 6 and not arm["failed"]
        assert arm["gpu_work"] == "simulated (sleep, no GPU)"
        assert arm["overhead_s"]["n"] == 6 and len(arm["per_turn"]) == 6
        for key in ("median", "p95", "mean", "max"):
            assert arm["overhead_s"][key] is not None
        assert arm["framework_cpu_per_turn_s"] > 0
        assert set(arm["gates"]) == {"compile", "device"}
    costs = report["arms"]["costs"]
    assert costs["gates"]["compile"]["calls"] == 6 and costs["gates"]["device"]["calls"] == 12
    # every turn's wall time is at least the work it was given (compile + 2 GPU stages)
    assert all(t["wall_s"] >= t["work_s"] >= 0.15 - 1e-3 for t in costs["per_turn"])


def test_busy_share_is_the_gates_own(report):
    for arm in report["arms"].values():
        device = arm["gates"]["device"]
        assert 0 < arm["gpu_busy_share"] <= 1
        assert arm["gpu_busy_share"] == pytest.approx(device["busy_s"] / device["wall_s"])
        assert device["busy_s"] <= device["held_s"] + 1e-9   # union never exceeds the sum
    costs = report["arms"]["costs"]["gates"]["device"]
    assert costs["busy_s"] >= 12 * 0.05 - 1e-3           # 12 GPU stages of 0.05 s, one at a time
