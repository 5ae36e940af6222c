"""The sandbox turns every way a child can misbehave into a value, and its limits hold.

Plain Python children (no torch) keep these fast; sizes stay small so the test machine is never at
risk (never a fork loop: root ignores RLIMIT_NPROC).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from feedback.sandbox import (
    ChildOutcome,
    descendants,
    isolation_available,
    kill_descendants,
    readable,
    run_child,
)

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def run_py(tmp_path: Path, code: str, **kw) -> ChildOutcome:
    kw.setdefault("timeout_s", 20)
    return run_child([sys.executable, "-c", code], cwd=tmp_path, env=ENV, **kw)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_normal_exit_and_output(tmp_path):
    out = run_py(tmp_path, "import sys; print('hello'); print('oops', file=sys.stderr)")
    assert out.ok and out.returncode == 0 and out.signal is None
    assert out.stdout_tail.strip() == "hello" and out.stderr_tail.strip() == "oops"


def test_cpu_seconds_count_the_child_and_what_it_waited_for(tmp_path):
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    out = run_py(tmp_path, f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])")
    assert out.ok and out.cpu_s is not None and 0.6 <= out.cpu_s < 5


def test_exit_status_and_os_exit(tmp_path):
    assert run_py(tmp_path, "import sys; sys.exit(3)").returncode == 3
    out = run_py(tmp_path, "import os; os._exit(7)")
    assert out.returncode == 7 and not out.ok and "status 7" in out.describe()


def test_segfault_is_a_signal(tmp_path):
    out = run_py(tmp_path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert out.returncode is None and out.signal == "SIGSEGV"
    assert "SIGSEGV" in out.describe()


def test_timeout_kills_the_process_group_with_its_grandchild(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    code = ("import subprocess, time\n"
            f"p = subprocess.Popen(['sleep', '300'])\nopen({str(pidfile)!r}, 'w').write(str(p.pid))\n"
            "time.sleep(300)\n")
    start = time.monotonic()
    out = run_py(tmp_path, code, timeout_s=15)  # time enough to start the grandchild under load
    assert out.timed_out and not out.ok and out.signal == "SIGKILL"
    assert time.monotonic() - start < 30
    assert not alive(int(pidfile.read_text()))


def test_grandchildren_left_behind_after_a_normal_exit_are_killed(tmp_path):
    pidfile = tmp_path / "orphan.pid"
    code = ("import subprocess, os\n"
            "p = subprocess.Popen(['sleep', '300'], process_group=0)\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n")
    out = run_py(tmp_path, code)
    assert out.ok
    time.sleep(0.2)
    assert not alive(int(pidfile.read_text()))  # its own process group, same session: found anyway


def test_memory_limit_on_the_cpu_path(tmp_path):
    out = run_py(tmp_path, "x = bytearray(400 * 1024 * 1024)", memory_mb=200)
    assert not out.ok and "MemoryError" in out.stderr_tail


def test_resident_memory_is_polled_when_the_address_space_is_not_limited(tmp_path):
    # the GPU path cannot use RLIMIT_AS; the parent kills the tree on resident memory instead
    out = run_py(tmp_path, "import time; x = bytearray(400 * 1024 * 1024); time.sleep(20)",
                 memory_mb=200, gpu=True)
    assert out.memory_exceeded and not out.ok and "memory" in out.describe(memory_mb=200)


def test_resident_memory_of_what_the_child_started_counts_too(tmp_path):
    # the session's processes come from one scan of /proc that all waiting threads share
    grandchild = "import time; x = bytearray(400 * 1024 * 1024); time.sleep(20)"
    out = run_py(tmp_path, f"import subprocess, sys, time; subprocess.Popen([sys.executable, "
                           f"'-c', {grandchild!r}]); time.sleep(20)", memory_mb=200, gpu=True)
    assert out.memory_exceeded and out.wall_s < 20


def test_threads_that_wait_on_children_share_one_scan_of_the_process_table(monkeypatch):
    from feedback import sandbox

    scans, now = [], [100.0]
    real = sandbox.process_table
    monkeypatch.setattr(sandbox, "process_table", lambda: scans.append(now[0]) or real())
    monkeypatch.setattr(sandbox.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(sandbox, "_SESSIONS", (float("-inf"), {}))
    tables = [sandbox._recent_sessions() for _ in range(16)]  # 16 waiters' checks at one moment
    assert scans == [100.0] and all(t is tables[0] for t in tables)
    assert os.getpid() in tables[0][os.getsid(0)]  # this process, in its own session
    now[0] += sandbox.POLL_S  # one poll later: scanned anew
    sandbox._recent_sessions()
    assert scans == [100.0, 100.0 + sandbox.POLL_S]


def test_a_parent_holding_over_1024_descriptors_still_waits_for_its_child(tmp_path):
    # a busy evaluator holds pipes and files of many workers: the wait on a child's pidfd must
    # not be select()'s, which refuses a descriptor past 1023
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        while not held or held[-1] < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        out = run_py(tmp_path, "import time; time.sleep(0.3)")
        assert out.ok and out.wall_s < 10
        r, w = os.pipe()  # what a standby worker's signal pipe is waited on with
        held += [r, w]
        assert r > 1023 and not readable(r, 0.01)
        os.write(w, b"R")
        assert readable(r, 1.0)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_output_flood_is_bounded(tmp_path):
    out = run_py(tmp_path, "import sys\nwhile True: sys.stdout.write('x' * 65536)",
                 max_output_bytes=2 * 1024 * 1024, tail_bytes=4096)
    # Python ignores SIGXFSZ, so the write fails (EFBIG) instead of the signal killing it
    assert not out.ok and (out.signal == "SIGXFSZ" or "File too large" in out.stderr_tail)
    assert len(out.stdout_tail) < 5000
    assert (tmp_path / "stdout.txt").stat().st_size <= 2 * 1024 * 1024


def test_cpu_time_limit(tmp_path):
    out = run_py(tmp_path, "while True: pass", cpu_time_s=1, timeout_s=30)
    assert out.signal in ("SIGXCPU", "SIGKILL") and not out.timed_out
    assert out.wall_s < 15


def test_environment_is_only_what_was_given(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_API_KEY", "hunter2")
    out = run_py(tmp_path, "import os; print(sorted(os.environ))")
    assert "SECRET_API_KEY" not in out.stdout_tail


def test_a_missing_program_is_a_value(tmp_path):
    out = run_child(["/nonexistent/program"], cwd=tmp_path, env=ENV, timeout_s=10)
    assert not out.ok


@pytest.mark.skipif("net" not in isolation_available(), reason="no network namespace here")
def test_no_network(tmp_path):
    code = ("import socket\ns = socket.socket()\ns.settimeout(3)\n"
            "try:\n    s.connect(('1.1.1.1', 80)); print('connected')\n"
            "except OSError as e:\n    print('refused', e)\n")
    assert "refused" in run_py(tmp_path, code).stdout_tail


@pytest.mark.skipif("mounts" not in isolation_available(), reason="no mount namespace here")
def test_read_only_paths_with_a_writable_hole(tmp_path):
    ro, hole = tmp_path / "ro", tmp_path / "ro" / "hole"
    hole.mkdir(parents=True)
    code = (f"import pathlib\nfor p in ({str(ro / 'a')!r}, {str(hole / 'b')!r}):\n"
            "    try:\n        pathlib.Path(p).write_text('x'); print('wrote', p)\n"
            "    except OSError as e:\n        print('denied', p)\n")
    out = run_child([sys.executable, "-c", code], cwd=tmp_path / "scratch", env=ENV, timeout_s=20,
                    readonly=[ro], writable=[hole])
    assert f"denied {ro / 'a'}" in out.stdout_tail and f"wrote {hole / 'b'}" in out.stdout_tail
    assert not (ro / "a").exists()


SPAWNER = ("import subprocess, sys, time; "
           "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
           "start_new_session=True); print(c.pid, flush=True); time.sleep(60)")
"""A process that starts a child in a session of its own, prints its pid and sleeps."""


def test_descendants_are_found_across_sessions():
    proc = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        child = int(proc.stdout.readline())
        assert child in descendants(proc.pid)
        assert descendants(child) == []
    finally:
        os.killpg(proc.pid, 9)
        os.kill(child, 9)


def test_kill_descendants_kills_a_child_in_a_session_of_its_own():
    # of `proc`, not of this process: pytest's own children (servers of other tests) must live
    proc = subprocess.Popen([sys.executable, "-c", SPAWNER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        child = int(proc.stdout.readline())
        assert kill_descendants(proc.pid) == 1
        deadline = time.monotonic() + 10
        while _state(child) not in ("Z", "X"):  # a zombie until its parent reaps it
            assert time.monotonic() < deadline, "the child still runs"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, 9)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rindex(")") + 2:].split()[0]
