"""The timing-stability script's own logic (its GPU run is recorded in docs/gpu-validation.md)."""

from __future__ import annotations

import argparse

import pytest

from experiments.bench.timing_stability import main, parse_variant, spread


def test_variants_parse_into_option_overrides():
    assert parse_variant("nosettle:settle_ms=0,input_sets=1") == (
        "nosettle", {"settle_ms": "0", "input_sets": "1"})
    assert parse_variant("defaults") == ("defaults", {})
    with pytest.raises(argparse.ArgumentTypeError, match="not KEY=VALUE"):
        parse_variant("bad:settle_ms")


def test_spread_is_max_over_min_of_the_medians():
    assert spread([1.0, 1.015, 1.01]) == pytest.approx(0.015)
    assert spread([2.0]) is None


def test_an_unknown_option_is_a_clear_error(capsys):
    assert main(["suite:level1/19", __file__, "--variant", "x:no_such_option=1"]) == 2
    assert "no_such_option" in capsys.readouterr().err


def test_the_suite_writes_each_evaluation_as_it_finishes(tmp_path, monkeypatch):
    """cpp, one evaluation per kernel, no build load: a run cut after two evaluations (here by an
    exception in the third, as a time limit's signal would) leaves those two in --out; a whole run
    says it is complete."""
    import json

    import feedback.evaluate as fe

    real, done = fe.evaluate, []

    def evaluate(*args, **kwargs):
        if len(done) == 2:
            raise KeyboardInterrupt  # the run is cut here
        done.append(real(*args, **kwargs))
        return done[-1]

    out = tmp_path / "stability.json"
    argv = ["--backend", "cpp", "--short", "-n", "1", "--compiles", "0", "--out", str(out)]
    monkeypatch.setattr(fe, "evaluate", evaluate)
    with pytest.raises(KeyboardInterrupt):
        main(argv)
    cut = json.loads(out.read_text())
    assert cut["complete"] is False and not cut["compiles_alongside"]
    assert [k["evaluations"] for k in cut["kernels"]] == [1, 1, 0]
    assert all(r["status"] == "ok" for k in cut["kernels"] for r in k["runs"]), cut["kernels"]
    monkeypatch.setattr(fe, "evaluate", real)
    assert main(argv) == 1  # complete, but one evaluation per kernel measures no spread
    whole = json.loads(out.read_text())
    assert whole["complete"] is True and [k["evaluations"] for k in whole["kernels"]] == [1, 1, 1]
    assert all(k["median_ms"] > 0 and k["do_bench_ms"] is None and k["spread_pct"] is None
               for k in whole["kernels"])


def test_do_bench_after_each_evaluation_gets_a_spread_of_its_own():
    """`--do-bench-each`: whether a shift between evaluations is the device's (do_bench moves
    too) or the evaluator's window (only its medians move)."""
    from types import SimpleNamespace

    from experiments.bench.stability_run import _kernel

    runs = [{"median_ms": 1.0, "speedup_eager": None, "noise": 0.002, "do_bench_ms": 0.9},
            {"median_ms": 1.05, "speedup_eager": None, "noise": 0.002, "do_bench_ms": 0.909}]
    row = _kernel(SimpleNamespace(name="relu", size=None, preset="small"), SimpleNamespace(id="p"),
                  runs, None, 2)
    assert row["spread_pct"] == pytest.approx(5.0) and row["do_bench_each_ms"] == [0.9, 0.909]
    assert row["do_bench_each_spread_pct"] == pytest.approx(1.0)
    assert _kernel(SimpleNamespace(name="relu", size=None, preset="small"),
                   SimpleNamespace(id="p"), runs[:1], None, 2)["do_bench_each_spread_pct"] is None


def test_the_suites_variants_are_interleaved_each_kernel_a_row_of_its_own(tmp_path, monkeypatch):
    """`--variant` in the suite form: an A/B of option sets with the same builds alongside, each
    kernel evaluated under A, then B, then the next kernel (cut here after two evaluations)."""
    import json

    import feedback.evaluate as fe

    real, seen = fe.evaluate, []

    def evaluate(problem, code, backend, options):
        if len(seen) == 2:
            raise KeyboardInterrupt
        seen.append(options.warmup)
        return real(problem, code, backend, options)

    out = tmp_path / "ab.json"
    monkeypatch.setattr(fe, "evaluate", evaluate)
    with pytest.raises(KeyboardInterrupt):
        main(["--backend", "cpp", "--short", "-n", "1", "--compiles", "0", "--out", str(out),
              "--variant", "a:warmup=2", "--variant", "b:warmup=3"])
    record = json.loads(out.read_text())
    names = [k["name"] for k in record["kernels"]]
    assert len(names) == 6 and names[0].endswith(":a") and names[1].endswith(":b")
    assert names[0].split(":")[0] == names[1].split(":")[0]
    assert [k["evaluations"] for k in record["kernels"]][:3] == [1, 1, 0] and seen == [2, 3]
    assert record["options"] == {"a": {"warmup": "2"}, "b": {"warmup": "3"}}


def test_kernelbench_timing_of_the_eager_reference_runs_in_a_child():
    """The outside clock the evaluator's eager median is checked against (on a GPU: CUDA events
    around each call, L2 flushed; here the host clock: the code path)."""
    from experiments.bench.child import run_kernelbench_eager_child
    from problems.spec import select

    relu = select("suite:level1/19").problems[0]
    got = run_kernelbench_eager_child(relu.model_dump(), size="small", device="cpu", trials=5)
    assert got["ok"], got
    for key in ("kernelbench_ms", "kernelbench_noflush_ms", "kernelbench_median_ms"):
        assert 0 < got[key] < 1000, got
    bad = run_kernelbench_eager_child(relu.model_dump(), size="no-such-size", device="cpu")
    assert not bad["ok"] and "no-such-size" in bad["error"], bad


def test_an_outside_clocks_child_holds_the_device_lock_only_for_its_device_work(tmp_path):
    """do_bench's and KernelBench's children start and import while another job holds the device
    (a timing of the evaluator), and take its lock only for their measurement."""
    import threading

    from experiments.bench.child import run_kernelbench_eager_child
    from feedback.cache import locked
    from problems.spec import select

    relu, lock, hold_s = select("suite:level1/19").problems[0], tmp_path / "device.lock", 12.0
    taken, done = threading.Event(), threading.Event()

    def other_job() -> None:
        with locked(lock):
            taken.set()
            done.wait(hold_s)

    holder = threading.Thread(target=other_job)
    holder.start()
    taken.wait()
    timer = threading.Timer(hold_s, done.set)
    timer.start()
    try:
        got = run_kernelbench_eager_child(relu.model_dump(), size="small", device="cpu",
                                          trials=3, device_lock=lock)
    finally:
        done.set()
        timer.cancel()
        holder.join()
    assert got["ok"], got
    assert 0.5 < got["device_wait_s"] < hold_s - 0.5, got  # waited, but not from its start
    free = run_kernelbench_eager_child(relu.model_dump(), size="small", device="cpu", trials=3,
                                       device_lock=lock)
    assert free["ok"] and free["device_wait_s"] < 1.0, free


def test_the_eager_agreement_compares_the_evaluators_eager_median_with_kernelbenchs_timing():
    from experiments.bench.stability_run import _kernel
    from experiments.bench.stability_suite import kernels

    k = kernels("cuda", short=True)[0]
    runs = [{"median_ms": m, "speedup_eager": None, "eager_ms": 0.5, "noise": 0.01}
            for m in (0.1, 0.101)]
    row = _kernel(k, k.problem()[0], runs, None, 2, {"ok": True, "kernelbench_ms": 0.52})
    assert row["eager_ms"] == 0.5 and row["kernelbench_eager_ms"] == 0.52
    assert row["eager_agreement_pct"] == round((0.5 / 0.52 - 1) * 100, 3)
    assert _kernel(k, k.problem()[0], runs, None, 2)["eager_agreement_pct"] is None


def test_kernels_named_on_the_command_line_are_chosen_and_an_unknown_name_is_refused(capsys):
    from experiments.bench.stability_suite import kernels
    from experiments.bench.timing_stability import main

    assert [k.name for k in kernels("cuda", True, ["relu_1.7ms", "relu_0.05ms"])] == \
        ["relu_0.05ms", "relu_1.7ms"]  # in the suite's order
    assert main(["--backend", "cpp", "--kernels", "relu_small,nope"]) == 2
    assert "no cpp kernel nope in the stability suite" in capsys.readouterr().err
