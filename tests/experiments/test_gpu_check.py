"""`make gpu-check`'s parts that need no GPU: the streamed test log, the time limit, the summary
written section by section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from experiments.bench import gpu_check, testlog

REPO = Path(__file__).resolve().parents[2]

SAMPLE = '''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_passes():
    assert True

def test_fails():
    assert 1 == 2, "one is not two"

@pytest.mark.skip(reason="not here")
def test_skipped():
    pass

def test_setup_error(broken):
    pass
'''


def test_the_plugin_streams_every_outcome_and_read_counts_them(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    log = tmp_path / "log.jsonl"
    env = {**os.environ, "KERNEL_REFINE_TESTLOG": str(log), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "experiments.bench.testlog",
                    "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path / "test_sample.py")],
                   cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    files, failures, unfinished = testlog.read(log)
    (row,) = files.values()
    assert (row["passed"], row["failed"], row["skipped"]) == (1, 2, 1)
    names = {f["test"].split("::")[1]: f for f in failures}
    assert set(names) == {"test_fails", "test_setup_error"}
    assert "one is not two" in names["test_fails"]["message"]
    assert names["test_setup_error"]["when"] == "setup" and "setup broke" in \
        names["test_setup_error"]["message"]
    assert unfinished == []


def test_a_test_still_running_at_the_kill_is_reported_unfinished(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"nodeid": "tests/a.py::test_x", "when": "start"}) + "\n"
                   + json.dumps({"nodeid": "tests/a.py::test_y", "when": "start"}) + "\n"
                   + json.dumps({"nodeid": "tests/a.py::test_y", "when": "call",
                                 "outcome": "passed", "duration": 1.5}) + "\n")
    files, _, unfinished = testlog.read(log)
    assert files["tests/a.py"]["passed"] == 1 and unfinished == ["tests/a.py::test_x"]


def test_a_files_seconds_are_its_tests_durations_summed_then_rounded(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"nodeid": f"tests/a.py::test_{i}", "when": "call",
                                       "outcome": "passed", "duration": 0.06}) + "\n"
                           for i in range(5)))
    files, _, _ = testlog.read(log)
    assert files["tests/a.py"] == {"passed": 5, "failed": 0, "skipped": 0, "seconds": 0.3}


def test_a_command_past_its_limit_is_killed_with_its_children(tmp_path):
    check = gpu_check.Check(tmp_path, budget_s=60, env=dict(os.environ))
    start = time.monotonic()
    code, _ = check.run("sleep", [sys.executable, "-c",
                                        "import subprocess; subprocess.run(['sleep', '30'])"], 1.0)
    assert code is None and time.monotonic() - start < 10
    assert "killed at its limit" in (tmp_path / "sleep.log").read_text()


def test_each_section_is_written_as_it_finishes(tmp_path):
    skip = [a for s in gpu_check.SECTIONS if s not in ("environment", "timing-tests")
            for a in ("--skip", s)]
    # no GPU here: the timing tests are all skipped (exit code 5 or 0), the environment fails
    code = gpu_check.main(["--out", str(tmp_path), "--budget-s", "120", *skip])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert list(summary["sections"]) == ["environment", "timing-tests"]
    assert summary["sections"]["environment"]["torch"]
    assert summary["sections"]["environment"]["status"] == "failed" and code == 1
    assert "make gpu-check" in (tmp_path / "summary.md").read_text()


JOB_SAMPLE = '''
from feedback.job import launch
from feedback.options import EvalOptions
from problems.spec import select

def test_one_job(tmp_path):
    relu = select("suite:level1/19").problems[0]
    launch("correct", relu, "cpp", EvalOptions(size="small", cache_dir=tmp_path), candidate=None,
           extensions_dir=tmp_path / "ext", arch=None, gpu_index=None, timeout_s=60,
           device_lock=tmp_path / "dev.lock")

def test_two_jobs_the_second_on_a_worker_started_ahead(tmp_path):
    from feedback.job import standby_workers

    relu = select("suite:level1/19").problems[0]
    with standby_workers(cpu=True):
        for _ in range(2):
            launch("correct", relu, "cpp", EvalOptions(size="small", cache_dir=tmp_path),
                   candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=None,
                   timeout_s=60, device_lock=tmp_path / "dev.lock")
'''


def test_the_job_log_says_how_long_each_job_waited_for_and_held_the_device(tmp_path, capsys):
    (tmp_path / "test_job_sample.py").write_text(JOB_SAMPLE)
    log, joblog = tmp_path / "log.jsonl", tmp_path / "jobs.jsonl"
    env = {**os.environ, "KERNEL_REFINE_TESTLOG": str(log), "KERNEL_REFINE_JOBLOG": str(joblog),
           "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "experiments.bench.testlog",
                           "-p", "no:cacheprovider", "-o", "addopts=",
                           str(tmp_path / "test_job_sample.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-2000:]
    logged = [json.loads(line) for line in joblog.read_text().splitlines()]
    rows = [r for r in logged if r["kind"] != "standby"]
    # the worker started ahead for a third job that never came: its imports' CPU seconds
    (unused,) = [r for r in logged if r["kind"] == "standby"]
    assert unused["role"] == "discarded" and unused["cpu_s"] > 0 and unused["holds"] == []
    assert all(r["cpu_s"] > 0.5 for r in rows)  # each job's worker imported torch at least
    (row,) = [r for r in rows if "test_one_job" in r["test"]]
    assert row["kind"] == "correct" and row["problem"] == "level1/19_relu"
    assert row["standby_s"] == {}  # no worker started ahead: nothing waited for
    first, second = [r for r in rows if "test_two_jobs" in r["test"]]
    assert first["standby_s"] == {}  # the block's first job starts its own worker
    assert set(second["standby_s"]) == {"ready"} and second["standby_s"]["ready"] >= 0
    assert "test_one_job" in row["test"] and row["held_s"] > 0 and row["wait_s"] >= 0
    assert row["seconds"] >= row["held_s"]
    assert [shared for _, _, shared in row["holds"]] == [True]  # a correctness job shares it
    # from the worker's report to the parent's reading it: inside the job's hold
    assert all(0 <= r["exit_s"] <= r["held_s"] + 0.01 for r in rows)
    stats = testlog.jobs(joblog)["correct/candidate"]
    assert stats["jobs"] == 3
    assert stats["held_s"] == pytest.approx(sum(r["held_s"] for r in rows), abs=0.1)
    assert stats["exit_s"] == pytest.approx(sum(r["exit_s"] for r in rows), abs=0.1)
    assert stats["cpu_s"] == pytest.approx(sum(r["cpu_s"] for r in rows), abs=0.1)
    gpu_check.print_table({"sections": {"tests": {"status": "passed", "seconds": 1.0,
                                                  "jobs": testlog.jobs(joblog)}}})
    printed = capsys.readouterr().out
    assert "  jobs correct/candidate (3 jobs): waited " in printed  # an average job, per kind
    # the worker's own account (no candidate: the job fails in its first trial)
    top = {k for k in row["phases"] if "/" not in k}
    assert top == {"start", "configure", "prepare", "trials", "environment", "other"}
    assert 0 < row["phases"]["prepare"] < row["seconds"] and row["phases"]["other"] >= 0
    parts = {k: v for k, v in row["phases"].items() if k.startswith("prepare/")}  # inside prepare
    assert {"prepare/context", "prepare/reference", "prepare/inputs"} <= set(parts)
    assert sum(parts.values()) <= row["phases"]["prepare"] + 0.01


def test_workers_left_running_by_a_killed_section_are_killed():
    marker = f"kr-test-{os.getpid()}-{time.monotonic_ns()}"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker],
                            start_new_session=True)
    try:
        time.sleep(0.5)
        assert gpu_check.kill_workers(marker.encode()) == 1
        assert proc.wait(timeout=10) == -9
    finally:
        proc.kill()


def test_a_section_killed_at_its_limit_takes_what_it_started_and_then_the_strays(tmp_path):
    """A command that runs past its limit is killed with the processes it started in sessions
    of their own; a section beside it keeps its workers until no section runs, when every
    evaluator worker still on the machine (here: the processes that carry this test's marker) is
    killed, so none of them runs on into the next section's timings. Sections that all end by
    themselves kill nothing."""
    marker = f"kr-test-{os.getpid()}-{time.monotonic_ns()}"
    spawn = ("import subprocess, sys, time; "
             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
             "start_new_session=True); time.sleep(120)")
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker],
                             start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                 start_new_session=True)
    try:
        check = gpu_check.Check(tmp_path, budget_s=60, env=dict(os.environ))
        check.worker_marker = marker.encode()
        with ThreadPoolExecutor(2) as pool:  # side by side, as gpu-check runs its sections
            for done in [pool.submit(gpu_check.run_section, check, [], "slow", lambda: {
                    "status": "timeout" if check.run("slow", [sys.executable, "-c", spawn],
                                                     2.0)[0] is None else "passed"}),
                         pool.submit(gpu_check.run_section, check, [], "quick",
                                     lambda: {"status": "passed"})]:
                done.result()
        check.kill_strays()
        assert check.summary["sections"]["slow"]["status"] == "timeout"
        assert check.summary["sections"]["quick"]["status"] == "passed"
        assert "(and 1 of its processes left running)" in (tmp_path / "slow.log").read_text()
        assert "1 evaluator workers outlived their section: killed" in check.log.read_text()
        assert stray.wait(timeout=10) == -9
        survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker],
                                    start_new_session=True)
        gpu_check.run_section(check, [], "quick", lambda: {"status": "passed"})
        check.kill_strays()
        assert survivor.poll() is None  # no section was killed: nothing is a stray
        survivor.kill()
        assert bystander.poll() is None  # neither started by it nor a worker: left alone
    finally:
        stray.kill()
        bystander.kill()


def test_the_ray_sweep_passes_only_when_it_judged_its_honest_kernels_ok(tmp_path, attempt,
                                                                         store_factory):
    """Its transcript holds honest kernels only: a sweep that ran but judged one wrongly (or
    stored no attempt) fails the section. (Stored attempts are fabricated: tests/experiments/
    conftest.py.)"""
    config = {"turns": 2, "trajectories": 1, "problems": "fixture:none"}
    store_factory(tmp_path / "good", "refine", config,
                  [attempt("level1/19_relu", 0, t, eager=1.2) for t in (0, 1)])
    store_factory(tmp_path / "bad", "refine", config,
                  [attempt("level1/19_relu", 0, 0, eager=1.2),
                   attempt("level1/19_relu", 0, 1, status="runtime_error")])
    good = gpu_check.ray_figures({"runs": [{"path": str(tmp_path / "good")}]})
    assert good["verdicts_ok"] and good["statuses"] == ["ok", "ok"]
    bad = gpu_check.ray_figures({"runs": [{"path": str(tmp_path / "bad")}]})
    assert bad["verdicts_ok"] is False and bad["statuses"] == ["ok", "runtime_error"]
    assert gpu_check.ray_figures({"runs": []})["verdicts_ok"] is False
    index = tmp_path / "sweep.json"
    index.write_text(json.dumps({"runs": [{"path": str(tmp_path / "bad")}]}))
    check = gpu_check.Check(tmp_path, budget_s=60, env=dict(os.environ))
    got = gpu_check.bench(check, "ray", [sys.executable, "-c", "pass"], index,
                          gpu_check.ray_figures)
    assert got["exit_code"] == 0 and got["status"] == "failed"


def test_the_gpu_test_files_hold_every_gpu_test():
    def collected(paths: list[str]) -> set[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-m", "gpu",
                              "-p", "no:cacheprovider", *paths], cwd=REPO, capture_output=True,
                             text=True, timeout=300, check=False).stdout
        return {line for line in out.splitlines() if "::" in line}

    files = gpu_check.gpu_test_files()
    assert "tests/feedback/test_gpu.py" in files and len(files) < 20, files
    everything = collected(["tests"])
    assert everything and collected(files) == everything


def test_a_crashed_workers_kill_is_found_in_the_kernel_log():
    text = ("[Tue Dec  1 10:00:00 2026] eth0: link up\n"
            "[Tue Dec  1 10:00:01 2026] python3 invoked oom-killer: gfp_mask=0x140cca\n"
            "[Tue Dec  1 10:00:01 2026] Out of memory: Killed process 4242 (python3) "
            "total-vm:9000000kB\n")
    assert gpu_check.kill_messages(text) == text.splitlines()[1:]
    assert gpu_check.kill_messages("[0.1] usb 1-1: new device\n") == []
    assert gpu_check.kill_messages(None) is None  # dmesg could not be read


STUCK = '''
import subprocess, sys, time

def parent_waits_here():
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\\ndef child_waits_here():\\n    print('up', flush=True)\\n"
         "    time.sleep(60)\\nchild_waits_here()"],
        stdout=subprocess.PIPE, start_new_session=True)
    child.stdout.readline()  # both processes are in their waits before the limit
    time.sleep(60)

parent_waits_here()
'''


def test_a_bench_section_cut_at_its_limit_leaves_its_python_stacks_in_its_log(tmp_path):
    """Where a section that judged nothing spent its time (H200 runs 26-27: the Ray sweep, cut
    with no trace): each of its Python processes, those in sessions of their own included,
    writes its stack before the kill. The limit leaves a loaded 2-core machine time to start
    both processes (CI once cut the parent before it reached its wait at 3 s)."""
    check = gpu_check.Check(tmp_path, budget_s=60, env=dict(os.environ))
    code, _ = check.run("stuck", [sys.executable, "-c", STUCK], 12.0, stacks=True)
    assert code is None
    log = (tmp_path / "stuck.log").read_text()
    stacks = log.split("the stacks of its Python processes", 1)[1]
    assert stacks.count("most recent call first") >= 2, stacks
    assert "line 10 in parent_waits_here" in stacks and "in child_waits_here" in stacks, stacks
    code, _ = check.run("plain", [sys.executable, "-c", STUCK], 3.0)  # tests: no stacks asked
    assert code is None and "most recent call first" not in (tmp_path / "plain.log").read_text()


def test_ray_logs_are_kept_with_each_files_tail(tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    (logs / "events").mkdir(parents=True)
    (logs / "raylet.out").write_text("started\n")
    (logs / "events" / "big.log").write_bytes(b"a" * 100 + b"the end")
    monkeypatch.setattr(gpu_check, "RAY_LOG_BYTES", 10)
    archive = tmp_path / "ray-logs.tar.gz"
    assert gpu_check.keep_ray_logs(logs, archive) == 2
    import tarfile

    with tarfile.open(archive) as tar:
        assert tar.extractfile("raylet.out").read() == b"started\n"
        assert tar.extractfile("events/big.log").read() == b"aaathe end"
    assert gpu_check.keep_ray_logs(tmp_path / "missing", tmp_path / "none.tar.gz") == 0


def test_builds_whose_nvcc_parses_torch_headers_go_first(tmp_path):
    """The longest builds start at once (H200 run 28: 117-129 s against 5-53 s for the rest);
    a candidate that only differs in Python from one already listed still waits at the end."""
    from feedback.options import EvalOptions

    light = 'load_inline(name="a", cpp_sources=C, cuda_sources=K, no_implicit_headers=True)'
    heavy = 'load_inline(name="b", cpp_sources=C, cuda_sources=K)'
    assert gpu_check.parses_torch_headers(heavy, "cuda")
    assert not gpu_check.parses_torch_headers(light, "cuda")
    assert not gpu_check.parses_torch_headers(heavy, "cpp")
    options = EvalOptions(cache_dir=tmp_path, arch="9.0")
    fixtures = [("p", light, "cuda"), ("p", heavy, "cuda"), ("p", light + "\n# again", "cuda"),
                ("p", "import triton", "triton")]
    ordered = gpu_check.first_per_extension(fixtures, options)
    assert [code for _, code, _ in ordered] == [heavy, light, "import triton", light + "\n# again"]


LOCK_SAMPLE = '''
import threading

import pytest

from feedback.cache import locked
from feedback.evaluate import device_lock
from feedback.options import EvalOptions

@pytest.mark.gpu
@pytest.mark.timing
def test_takes_the_device_lock():
    got = threading.Event()

    def take():
        with locked(device_lock(EvalOptions(device="cuda:0"))):
            got.set()
    threading.Thread(target=take, daemon=True).start()
    assert got.wait(20), "waited for the host's device lock"
'''


def test_the_timing_tests_lock_a_folder_of_their_own_while_gpu_check_holds_the_hosts(
        tmp_path, monkeypatch):
    """gpu-check holds the host's device lock while the timing tests run, so the Ray sweep
    started beside them keeps off the device; the tests' own jobs must not wait for it."""
    from feedback.cache import locked
    from feedback.evaluate import LOCKS_ENV, device_lock
    from feedback.options import EvalOptions

    (tmp_path / "test_lock_sample.py").write_text(LOCK_SAMPLE)
    monkeypatch.setenv(LOCKS_ENV, str(tmp_path / "host"))
    check = gpu_check.Check(tmp_path / "out", budget_s=200,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    check.out.mkdir()
    sample = [str(tmp_path / "test_lock_sample.py")]
    with locked(device_lock(EvalOptions(device="cuda:0"))):
        own = gpu_check.tests(check, "timing-tests", "gpu and timing", 1, tmp_path, sample,
                              locks=tmp_path / "own")
        assert check.env[LOCKS_ENV] == str(tmp_path / "host")  # the folder is that phase's only
        held = gpu_check.tests(check, "tests", "gpu and timing", 1, tmp_path, sample)
    assert own["summary"] == "1 passed, 0 failed", own
    assert held["summary"] == "0 passed, 1 failed", held  # without a folder of its own: it waits
    assert "waited for the host's device lock" in held["failures"][0]["message"]
