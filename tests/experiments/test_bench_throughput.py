"""The throughput bench's own bookkeeping (its GPU run is docs/benchmarks.md's P2).

FABRICATED rows: stage seconds and statuses invented to give known answers; nothing here was
measured. One slow test runs the real framework arm on the cpp backend (the GPU path's code
from start to result file, on one C++ build).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.bench.throughput import main, one_per_problem
from experiments.bench.throughput_report import differing_verdicts, merge, summary
from experiments.bench.timing_stability import parse_overrides


def _row(file: str, status: str, **stages: float) -> dict:
    return {"file": file, "status": status, "stage_seconds": stages, "device": "fixture GPU"}


def _stats(median_ms: float):
    from feedback.result import TimingStats
    return TimingStats(median_ms=median_ms, mean_ms=median_ms, std_ms=0.0, min_ms=median_ms,
                       max_ms=median_ms, n=10, clock="cuda_events")


def _timed(file: str, status: str, **ms: float) -> dict:
    return {"arm": "framework", "file": file, "status": status, "ms": ms}


@pytest.fixture
def result() -> dict:
    framework = {"wall_s": 360.0, "rows": [
        _row("a.py", "ok", compile=10.0, correct=2.0, timing=4.0),
        _row("b.py", "mismatch", compile=30.0, correct=3.0),
        _row("c.py", "compile_error", compile=20.0)],
        "stage_s": {"compile": {"n": 3, "sum": 60.0, "median": 20.0}}}
    ray = {"wall_s": 720.0, "rows": [_row("a.py", "ok"), _row("b.py", "ok"),
                                     _row("c.py", "compile_error")]}
    return {"date": "2026-12-01", "candidates": 3, "problems": 2, "framework": framework,
            "stock": {"wall_s": 1080.0, "rows": [_row(f, "ok") for f in ("a.py", "b.py", "c.py")]},
            "ray": ray, "baselined": {**framework, "wall_s": 180.0, "baseline_setup_s": 90.0}}


def test_summary_has_the_issue_fields_computed_from_the_arms(result):
    assert summary(result) == {
        "date": "2026-12-01", "device": "fixture GPU", "candidates": 3, "problems": 2,
        "framework_per_hour": 30.0, "baselined_per_hour": 60.0, "kernelbench_per_hour": 10.0,
        "ray_per_hour": 15.0,
        "build_median_s": 20.0,
        "device_s_per_candidate": 4.5}  # (2 + 4) and 3 over the 2 that reached the device


def test_an_arm_not_run_is_none_never_zero(result):
    del result["ray"], result["stock"], result["baselined"]
    record = summary(result)
    assert record["ray_per_hour"] is None and record["kernelbench_per_hour"] is None
    assert record["baselined_per_hour"] is None
    assert differing_verdicts(result) is None


def test_verdicts_that_differ_between_local_and_ray_are_named(result):
    assert differing_verdicts(result) == ["b.py: local mismatch, ray ok"]


def test_short_takes_one_candidate_per_problem():
    found = [{"problem": Path(p), "file": f} for p, f in
             [("1_a.py", "x0"), ("1_a.py", "x1"), ("2_b.py", "y0"), ("3_c.py", "z0")]]
    assert [c["file"] for c in one_per_problem(found)] == ["x0", "y0", "z0"]


def test_bad_arms_and_folders_are_one_line_errors(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--problems", "problems/suite", "--arms", "framework,nope"])
    assert "--arms: unknown arm(s) nope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path / "missing"), "--problems", "problems/suite"])
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--problems", "problems/suite", "--options", "timing_trials=0"])
    assert "--options:" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--problems", "problems/suite", "--options", "no_such_option=1"])
    assert "no_such_option" in capsys.readouterr().err


def test_options_override_the_framework_arms_evaluator_defaults(tmp_path):
    """`--options` is the A/B of an evaluator default; the bench's own flags stay."""
    import argparse

    from experiments.bench.throughput import arm_options

    args = argparse.Namespace(device="cpu", size=None, profile=False, correct_trials=5,
                              compile_baseline=True, arch=None,
                              options=parse_overrides("timing_trials=10,compile_baseline=false"))
    options = arm_options(args, tmp_path)
    assert (options.timing_trials, options.compile_baseline, options.cache_dir) == (10, False, tmp_path)
    assert arm_options(argparse.Namespace(**{**vars(args), "options": {}}), tmp_path).timing_trials is None


def test_arms_of_separate_calls_merge_into_one_record(result):
    ray_call = {**{k: v for k, v in result.items() if k not in ("framework", "baselined", "stock")},
                "command": "ray call"}
    local_call = {**{k: v for k, v in result.items() if k != "ray"}, "command": "local call"}
    merged = merge([local_call, ray_call])
    assert summary(merged) == summary(result)
    assert merged["command"] == ["local call", "ray call"]
    with pytest.raises(ValueError, match="more than one output"):
        merge([local_call, local_call])
    other = {**ray_call, "ray": {**result["ray"], "rows": result["ray"]["rows"][:1]}}
    with pytest.raises(ValueError, match="other candidates"):
        merge([local_call, other])


def test_each_finished_candidate_is_printed_and_kept_before_the_arm_ends(tmp_path, capsys):
    """A run cut at the device tool's limit still leaves what finished, in order."""
    import argparse
    import json
    import time

    from experiments.bench.throughput import progress
    from feedback.result import EvalResult, Status

    args = argparse.Namespace(out=tmp_path / "tp.json")
    start = time.monotonic()
    timed = {"runtime": _stats(0.5), "eager": _stats(1.25)}  # no compiled baseline
    for name, status, stages in (("a.py", Status.ok, {"compile": 31.25, "timing": 2.0}),
                                 ("b.py", Status.compile_error, {"compile": 12.0})):
        result = EvalResult(status=status, backend="cuda", problem_id="p", code_hash="h",
                            stage=None if status == Status.ok else "compile",
                            stage_seconds=stages, **(timed if status == Status.ok else {}))
        progress(args, "local", start, name, result)
    rows = [json.loads(line) for line in (tmp_path / "tp.progress.jsonl").read_text().splitlines()]
    assert [(r["arm"], r["file"], r["status"]) for r in rows] == [
        ("framework", "a.py", "ok"), ("framework", "b.py", "compile_error")]
    assert rows[0]["stage_seconds"] == {"compile": 31.25, "timing": 2.0}
    assert rows[0]["ms"] == {"candidate": 0.5, "eager": 1.25}
    assert rows[0]["samples"] == {"candidate": 10, "eager": 10}
    assert rows[0]["timing"]["eager"]["median_ms"] == 1.25 and rows[0]["timing"]["eager"]["n"] == 10
    assert rows[1]["ms"] == {} and rows[1]["samples"] == {} and rows[1]["timing"] == {}
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].endswith("a.py: ok compile 31.2 timing 2.0")
    assert "b.py: compile_error compile 12.0" in printed[1]


def test_parts_of_an_arm_from_separate_calls_join_with_their_walls_summed(result):
    """`--part K/N`: each part's wall time adds up; rows are put in the folder's order."""
    def part(k: int, files: slice, wall: float) -> dict:
        rows = result["framework"]["rows"][files]
        return {"date": "2026-12-01", "candidates": len(rows), "problems": len(rows),
                "command": f"part {k}", "part": [k, 2],
                "framework": {"wall_s": wall, "pch_setup_s": 5.0, "rows": rows,
                              "stage_s": {}}}
    one, two = part(1, slice(0, 2), 100.0), part(2, slice(2, 3), 80.0)
    for row, problem in zip(result["framework"]["rows"], ("p1", "p1", "p2")):
        row["problem"] = problem
    merged = merge([two, one])
    assert [r["file"] for r in merged["framework"]["rows"]] == ["a.py", "b.py", "c.py"]
    assert merged["framework"]["wall_s"] == 180.0 and merged["framework"]["pch_setup_s"] == 10.0
    assert merged["framework"]["parts_wall_s"] == [100.0, 80.0]
    assert merged["framework"]["stage_s"]["compile"] == {"n": 3, "sum": 60.0, "median": 20.0}
    assert (merged["candidates"], merged["problems"]) == (3, 2)
    assert summary(merged)["framework_per_hour"] == 60.0  # 3 candidates in 180 s
    with pytest.raises(ValueError, match="not 1..N"):
        merge([one])


def test_parts_cover_every_candidate_once_with_about_equal_inputs():
    """`--part K/N` deals the candidates out by their inputs' elements: every candidate in one
    part, part sizes within one, the largest inputs spread over the parts."""
    from experiments.bench.throughput import CANDIDATES, _part, find_candidates, part_of
    from problems.inputs import meta_inputs
    from problems.loaders import SUITE_ROOT, load_file

    candidates, _ = find_candidates(CANDIDATES / "cuda", SUITE_ROOT)
    parts = [part_of(candidates, *_part(f"{k}/3", len(candidates))) for k in (1, 2, 3)]
    files = [c["file"].name for part in parts for c in part]
    assert sorted(files) == sorted(c["file"].name for c in candidates)  # each exactly once
    assert sorted(map(len, parts)) == [13, 14, 14]
    for part in parts:  # the folder's order within a part
        assert [c["file"] for c in part] == sorted(c["file"] for c in part)
    loads = [sum(x.numel() for c in part for x in meta_inputs(load_file(c["problem"])))
             for part in parts]
    assert max(loads) < 1.1 * min(loads), loads
    for bad in ("0/3", "4/3", "3", "a/b", "2/50"):
        with pytest.raises(ValueError):
            _part(bad, 41)


def test_device_seconds_per_candidate_are_the_busy_seconds_of_the_job_log(result):
    """Overlapping shared holds count once; the baselines' holds count too."""
    from experiments.bench.testlog import busy_seconds

    rows = [{"kind": "correct", "began": 0.0, "seconds": 5.0, "held_s": 4.0, "holds": [[1.0, 5.0]]},
            {"kind": "correct", "began": 0.0, "seconds": 6.0, "held_s": 3.0, "holds": [[3.0, 6.0]]},
            {"kind": "time", "began": 6.0, "seconds": 4.0, "held_s": 2.0,
             "holds": [[7.0, 8.0], [8.5, 9.5]]},
            {"kind": "time", "began": 20.0, "seconds": 3.0, "held_s": 1.5},  # logged before holds
            {"kind": "build", "began": 0.0, "seconds": 40.0, "held_s": None}]
    assert busy_seconds(rows) == 5.0 + 1.0 + 1.0 + 1.5
    result["framework"]["device_busy_s"] = 30.0
    assert summary(result)["device_s_per_candidate"] == 10.0  # 30 s over its 3 candidates


def test_the_device_timeline_splits_held_seconds_into_alone_and_shared_and_idle_ones():
    from experiments.bench.testlog import device_timeline, job_stats, per_job

    rows = [{"kind": "build", "began": 0.0, "seconds": 10.0, "held_s": None},
            {"kind": "time", "role": "eager", "began": 1.0, "seconds": 5.0, "held_s": 3.0,
             "holds": [[2.0, 3.0, True], [4.0, 6.0, False]]},  # prepared shared, timed alone
            {"kind": "correct", "began": 9.0, "seconds": 4.0, "held_s": 4.0,
             "holds": [[9.0, 13.0, True]]},
            {"kind": "correct", "began": 11.0, "seconds": 3.0, "held_s": 3.0,
             "holds": [[11.0, 14.0, True]]},
            {"kind": "time", "role": "candidate", "began": 15.0, "seconds": 5.0, "held_s": 4.0,
             "holds": [[16.0, 20.0, False]]}]
    assert device_timeline(rows) == {
        "span_s": 20.0, "busy_s": 1.0 + 2.0 + 5.0 + 4.0, "alone_s": 2.0 + 4.0, "shared_only_s": 6.0,
        # one job held it shared in 2-3, 9-11 and 13-14; two jobs in 11-13
        "shared_by_holders_s": {"1": 1.0 + 2.0 + 1.0, "2": 2.0},
        "first_build_s": 10.0, "idle_before_first_build_s": 10.0 - 1.0 - 2.0 - 1.0,
        "idle_after_s": 10.0 - 4.0 - 4.0}
    stats = job_stats([{**r, "role": r.get("role", "candidate"),
                        "standby_s": {"ready": 0.5} if r["kind"] == "correct" else {},
                        "exit_s": 0.25 if r["kind"] == "correct" else None,
                        "wait_s": 1.0 if r["kind"] == "correct" else 0.0,
                        "phases": {"trials": 1.0, "handoff": 9.0}} for r in rows])
    assert (stats["time/eager"]["alone_s"], stats["time/eager"]["shared_s"]) == (2.0, 1.0)
    assert (stats["correct/candidate"]["shared_s"], stats["correct/candidate"]["standby_s"]) == (
        7.0, {"ready": 1.0})
    (line,) = [x for x in per_job(stats) if x.startswith("correct/candidate")]
    assert line == ("correct/candidate (2 jobs): waited 1.00 s, alone 0.00 s, shared 3.50 s, "
                    "worker ready 0.50, exit 0.25 s; trials 1.00")  # a job's average; handoff left out
    rows[-1].pop("holds")  # a log from before holds said whether they were shared
    assert device_timeline(rows)["alone_s"] is None
    assert device_timeline(rows)["shared_by_holders_s"] is None


def test_job_stats_sum_each_jobs_seconds_before_rounding():
    from experiments.bench.testlog import job_stats

    # 0.06 s each: a sum rounded at every job would say 0.5 s for these five, not 0.3
    rows = [{"kind": "correct", "role": "candidate", "seconds": 1.06, "held_s": 0.06,
             "exit_s": 0.06, "holds": [[0.0, 0.006, True]], "standby_s": {"ready": 0.006}}
            for _ in range(5)]
    stats = job_stats(rows)["correct/candidate"]
    assert (stats["seconds"], stats["held_s"], stats["exit_s"]) == (5.3, 0.3, 0.3)
    assert (stats["shared_s"], stats["standby_s"]) == (0.03, {"ready": 0.03})


def test_the_report_says_where_a_local_arms_device_seconds_went(result):
    from experiments.bench.throughput_report import markdown

    del result["ray"], result["stock"]  # the fixture's rows of these have no stage figures
    result["framework"].update(pch_setup_s=20.0, builds_with_pch=3, builds_seen=3)
    result["framework"]["device"] = {"span_s": 20.0, "busy_s": 12.0, "alone_s": 6.0,
                                     "shared_only_s": 6.0,
                                     "shared_by_holders_s": {"1": 4.0, "2": 2.0}}
    result["framework"]["jobs"] = {"time/candidate": {
        "jobs": 2, "wait_s": 3.0, "alone_s": 4.0, "shared_s": 1.0, "standby_s": {"context": 0.4},
        "phases": {"windows": 1.0, "checks": 2.0, "handoff": 5.0}}}
    result["framework"]["rows"][0]["samples"] = {"candidate": 10, "eager": 12, "compiled": 40}
    result["framework"]["rows"][1]["samples"] = {"candidate": 14, "eager": 10}
    # the compiled program's samples: quartiles 0.99 and 1.03 around a median of 1.0 (4%)
    result["framework"]["rows"][0]["timing"] = {"compiled": {
        "samples_ms": [0.95, 0.99, 0.99, 1.0, 1.03, 1.03, 1.2], "launch_ms": 0.146}}
    text = markdown(result)
    assert "framework device: span_s 20.0, busy_s 12.0, alone_s 6.0, shared_only_s 6.0" in text
    assert ("framework timed samples: candidate 24 over 2 (most 14), eager 22 over 2 (most 12), "
            "compiled 40 over 1 (most 40, spread % 4.0, launch ms 0.146)") in text
    assert "seconds by jobs holding it: 1: 4.0, 2: 2.0" in text
    assert ("- time/candidate (2 jobs): waited 1.50 s, alone 2.00 s, shared 0.50 s, "
            "worker context 0.20; checks 1.00, windows 0.50") in text
    assert "baselined device" not in text  # its fixture has no job log


def test_timing_shift_compares_the_timed_medians_of_candidates_ok_in_both_arms():
    from experiments.bench.throughput_report import timing_shift

    before = [_timed("a.py", "ok", candidate=1.0, eager=2.0, compiled=4.0),
              _timed("b.py", "ok", candidate=2.0, eager=3.0),
              _timed("c.py", "ok", candidate=5.0, eager=5.0),
              _timed("d.py", "mismatch")]
    after = [_timed("a.py", "ok", candidate=1.0, eager=2.5, compiled=4.0),
             _timed("b.py", "ok", candidate=2.2, eager=3.3),
             _timed("c.py", "timeout"),  # not ok after: left out
             _timed("d.py", "ok", candidate=9.0, eager=9.0)]  # not ok before: left out
    assert timing_shift(before, after) == {
        "candidate": {"candidates": 2, "median": 1.05, "least": 1.0, "most": 1.1},
        "eager": {"candidates": 2, "median": 1.175, "least": 1.1, "most": 1.25},
        "compiled": {"candidates": 1, "median": 1.0, "least": 1.0, "most": 1.0}}
    assert timing_shift(before, [{**r, "ms": None} for r in after]) == {}


def test_compare_reads_a_result_and_a_cut_runs_progress_file(tmp_path, capsys):
    import json

    result = tmp_path / "before.json"
    result.write_text(json.dumps({"framework": {"rows": [
        _timed("a.py", "ok", candidate=1.0, eager=2.0), _timed("b.py", "ok", candidate=3.0)]}}))
    cut = tmp_path / "after.progress.jsonl"
    cut.write_text("\n".join(json.dumps(r) for r in (
        _timed("a.py", "ok", candidate=1.5, eager=2.0),
        {**_timed("a.py", "ok", candidate=9.0), "arm": "ray"})) + "\n")
    assert main(["--compare", str(result), str(cut)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "candidate": {"candidates": 1, "median": 1.5, "least": 1.5, "most": 1.5},
        "eager": {"candidates": 1, "median": 1.0, "least": 1.0, "most": 1.0}}
    old = tmp_path / "old.json"  # a result from before rows kept their medians
    old.write_text(json.dumps({"framework": {"rows": [_row("a.py", "ok")]}}))
    assert main(["--compare", str(old), str(cut)]) == 1
    assert "no candidate is ok with timed medians in both" in capsys.readouterr().out
    stock_only = tmp_path / "stock.json"
    stock_only.write_text(json.dumps({"stock": {"rows": []}}))
    for bad, says in ((stock_only, "has no framework arm"), (tmp_path / "missing.json", "No such file")):
        with pytest.raises(SystemExit):
            main(["--compare", str(bad), str(cut)])
        assert says in capsys.readouterr().err


@pytest.mark.slow
def test_the_framework_arm_runs_end_to_end_on_the_cpp_backend(tmp_path, capsys):
    """The arm as a GPU call runs it, on one cpp candidate: evaluated, written, summarised, each
    row with its timed medians and sample counts, and the job log's device figures."""
    import json

    import feedback.evaluate
    from feedback import job

    untraced = (job.launch, job.locked, job._judge, feedback.evaluate.launch)
    out, kept = tmp_path / "tp.json", tmp_path / "machine"
    code = main(["experiments/bench/candidates/cpp", "--problems", "problems/suite",
                 "--backend", "cpp", "--size", "small", "--no-compile-baseline", "--limit", "1",
                 "--arms", "framework", "--compile-workers", "1", "--pch-from", str(kept),
                 "--options", "timing_trials=10,warmup=1", "--out", str(out)])
    assert code == 0
    # the set-up's precompiled header is left for the next arm (`--pch-from` had none)
    assert list((kept / "pch").rglob("*.gch")) and not list(kept.glob("pch.part-*"))
    # the job log's wrappers are gone with the run: later evaluations in this process log nothing
    assert (job.launch, job.locked, job._judge, feedback.evaluate.launch) == untraced
    result = json.loads(out.read_text())
    [row] = result["framework"]["rows"]
    assert row["status"] == "ok", row["message"]
    assert set(row["ms"]) == set(row["samples"]) == {"candidate", "eager"}
    assert all(n >= 10 for n in row["samples"].values())
    assert all(len(row["timing"][p]["samples_ms"]) == n for p, n in row["samples"].items())
    assert result["framework_per_hour"] > 0 and result["framework"]["device"]["busy_s"] > 0
    progress = [json.loads(line) for line in out.with_suffix(".progress.jsonl").read_text().splitlines()]
    assert [(p["file"], p["samples"]) for p in progress] == [(row["file"], row["samples"])]
