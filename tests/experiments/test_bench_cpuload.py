"""The throughput bench's CPU sampler: parsing /proc, kinds of process, and a real sampler that
sees a busy child and itself stopped."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from experiments.bench import cpuload
from experiments.bench.throughput_report import _device_lines


def test_parse_stat_takes_fields_after_the_last_parenthesis():
    fields = " ".join(str(v) for v in range(3, 30))  # state=3, ppid=4, ... utime=14, stime=15
    comm, ppid, ticks, started = cpuload.parse_stat(f"77 (odd) name (x)) {fields}")
    assert comm == "odd) name (x)"
    assert (ppid, ticks, started) == (4, 14 + 15, 22)


def test_machine_ticks_leave_idle_and_iowait_out():
    busy, total = cpuload.machine_ticks("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 1 2 3\n")
    assert (busy, total) == (10 + 1 + 5 + 2 + 3 + 4, 132)


def test_kind_of_follows_ancestors_to_the_compile_pool():
    procs = {1: ("python3", 0, "python -m experiments.bench.throughput"),
             2: ("python3", 1, "python -m feedback.worker --channel 3"),
             3: ("python3", 2, "python .../torch/_inductor/compile_worker/__main__.py"),
             4: ("python3", 3, "python .../compile_worker/__main__.py"),
             5: ("ptxas", 4, "ptxas -arch sm_90"),
             6: ("python3", 1, "python -m feedback.worker --channel 4"),
             7: ("ninja", 6, "ninja -v"),
             8: ("cicc", 7, "cicc --orig_src_file_name x.cu"),
             9: ("cc1plus", 7, "cc1plus -quiet"),
             10: ("bash", 1, "bash -c sleep")}
    kinds = {pid: cpuload.kind_of(pid, procs, bench=1) for pid in procs}
    assert kinds == {1: "bench", 2: "workers", 3: "inductor pool", 4: "inductor pool",
                     5: "inductor pool", 6: "workers", 7: "build tools", 8: "build tools",
                     9: "build tools", 10: "other"}


def _stat(pid: int, comm: str, ppid: int, ticks: int) -> str:
    rest = ["S", ppid] + [0] * 9 + [ticks, 0] + [0] * 6 + [5]  # started at tick 5
    return f"{pid} ({comm}) " + " ".join(map(str, rest))


def _fake_proc(root: Path, busy: int, procs: dict[int, tuple[str, int, int]],
               threads: dict[int, dict[int, tuple[str, int]]] | None = None) -> None:
    """A /proc of `procs` (pid -> (comm, ppid, ticks)); a pid in `threads` (tid -> (name,
    ticks)) is a worker (`python -m feedback.worker`) with those threads."""
    import shutil

    for old in root.glob("[0-9]*"):
        shutil.rmtree(old)
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(f"cpu {busy} 0 0 1000 0 0 0 0 0 0\n")
    for pid, (comm, ppid, ticks) in procs.items():
        (root / str(pid) / "task").mkdir(parents=True)
        (root / str(pid) / "stat").write_text(_stat(pid, comm, ppid, ticks))
        worker = pid in (threads or {})
        (root / str(pid) / "cmdline").write_text(f"{comm}\0-m\0feedback.worker" if worker
                                                 else f"{comm}\0-x")
        for tid, (name, used) in (threads or {}).get(pid, {}).items():
            (root / str(pid) / "task" / str(tid)).mkdir()
            (root / str(pid) / "task" / str(tid) / "stat").write_text(_stat(tid, name, ppid, used))


def test_sampler_counts_ticks_gained_between_scans(tmp_path):
    proc = tmp_path / "proc"
    _fake_proc(proc, 100, {1: ("python3", 0, 50), 2: ("cicc", 1, 20)})
    sampler = cpuload.Sampler(bench=1, proc=proc)
    assert sampler.row() is None  # the first scan only sets the counts
    # cicc gained 30 ticks; a new nvcc counts all of its 10; python gained none
    _fake_proc(proc, 140, {1: ("python3", 0, 50), 2: ("cicc", 1, 50), 3: ("nvcc", 1, 10)})
    sampler.last = (sampler.last[0] - 2.0, sampler.last[1])  # two seconds between the scans
    row = sampler.row()
    tick = cpuload.TICK_S
    assert abs(row["s"] - 2.0) < 0.1
    assert abs(row["by"]["build tools"] - 40 * tick / row["s"]) < 1e-3
    assert row["by"]["bench"] == 0
    assert abs(row["cores"] - 40 * tick / row["s"]) < 1e-3


def test_a_workers_ticks_are_split_by_thread(tmp_path):
    proc = tmp_path / "proc"
    _fake_proc(proc, 0, {1: ("python3", 0, 0), 2: ("python3", 1, 10)},
               threads={2: {2: ("python3", 6), 3: ("python3", 4)}})
    sampler = cpuload.Sampler(bench=1, proc=proc)
    sampler.row()
    # the main thread gained 10 ticks, an unnamed pool thread 20, a new CUDA thread 5
    _fake_proc(proc, 0, {1: ("python3", 0, 0), 2: ("python3", 1, 45)},
               threads={2: {2: ("python3", 16), 3: ("python3", 24), 17: ("cuda-EvtHandlr", 5)}})
    sampler.last = (sampler.last[0] - 1.0, sampler.last[1])
    row = sampler.row()
    assert row["by"]["workers"] > 0
    gained = {k: round(v * row["s"] / cpuload.TICK_S) for k, v in row["worker_threads"].items()}
    assert gained == {"main": 10, "python#": 20, "cuda-EvtHandlr": 5}
    out = cpuload.summary([row], cores=16)
    assert list(out["worker_threads_s"]) == ["python#", "main", "cuda-EvtHandlr"]
    assert out["cores"] == 16


def test_summary_integrates_rows_and_names_what_kinds_missed():
    rows = [{"t": 1, "s": 2.0, "cores": 3.0, "by": {"build tools": 1.0, "workers": 0.5}},
            {"t": 3, "s": 1.0, "cores": 2.0, "by": {"build tools": 2.0}}]
    out = cpuload.summary(rows, cores=16)
    assert out["machine_cpu_s"] == 8.0 and out["span_s"] == 3.0
    assert out["cpu_s"]["build tools"] == 4.0 and out["cpu_s"]["workers"] == 1.0
    assert out["unattributed_s"] == 3.0 and out["mean_busy_cores"] == 2.67
    line = _device_lines("framework", {"cpu": out})[0]
    assert "machine 8" in line and "build tools 4" in line and "of 16" in line


def test_a_real_sampler_sees_a_busy_child_and_stops(tmp_path):
    path = tmp_path / "cpu.jsonl"
    sampler = cpuload.start(path)
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nt = time.time()\nwhile time.time() - t < 2.5: pass"])
    busy.wait()
    time.sleep(2 * cpuload.INTERVAL_S)
    cpuload.stop(sampler)
    assert sampler.returncode == 0
    out = cpuload.summary(cpuload.read(path))
    assert out["cpu_s"]["other"] >= 1.0  # the busy child: neither a tool, a worker nor the bench
    assert out["machine_cpu_s"] >= out["cpu_s"]["other"] - 0.5
