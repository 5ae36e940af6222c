"""Several candidates in flight per device: the device lock's order, and the batch's lanes.

The lock: shared holders (correctness jobs) overlap, an exclusive one (a timing) waits for them
and, once it waits, goes before any shared caller that comes after it, in this process or
another. The lanes: `iter_evaluate` runs `lanes` candidates at once per device and times each
problem's baselines once, ahead.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from feedback.cache import locked
from feedback.evaluate import LOCKS_ENV, device_lock, iter_evaluate
from feedback.options import EvalOptions
from feedback.result import EvalResult, Status


def test_an_exclusive_waiter_goes_before_later_shared_callers(tmp_path):
    lock, order = tmp_path / "dev.lock", []
    first_in, release_first = threading.Event(), threading.Event()

    def holder():
        with locked(lock, shared=True):
            first_in.set()
            release_first.wait(5)

    def caller(name: str, shared: bool):
        with locked(lock, shared=shared):
            order.append(name)
            time.sleep(0.05)

    a = threading.Thread(target=holder)
    a.start()
    assert first_in.wait(5)
    b = threading.Thread(target=caller, args=("exclusive", False))
    b.start()
    time.sleep(0.2)  # the exclusive caller now waits behind the first shared holder
    c = threading.Thread(target=caller, args=("shared later", True))
    c.start()
    time.sleep(0.2)
    assert order == []  # neither gets in while the first holder holds it
    release_first.set()
    for t in (a, b, c):
        t.join(5)
    assert order == ["exclusive", "shared later"]


# one caller of the lock in a process of its own: `LOCK shared|exclusive NAME HOLD_S LOG`
CALLER = """
import sys, time
from pathlib import Path
from feedback.cache import locked
lock, mode, name, hold, log = Path(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4]), \\
    sys.argv[5]
with open(log, "a") as f:
    f.write(f"asks {name}\\n")
with locked(lock, shared=mode == "shared"):
    with open(log, "a") as f:
        f.write(f"in {name}\\n")
    time.sleep(hold)
"""


def test_an_exclusive_waiter_goes_first_across_processes_too(tmp_path):
    """Test processes, Ray actors and sweeps on one GPU are processes of their own: flock alone
    would let their correctness jobs keep a timing waiting for as long as they keep coming."""
    lock, log = tmp_path / "dev.lock", tmp_path / "log"
    log.touch()

    def start(mode: str, name: str, hold: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CALLER, str(lock), mode, name, str(hold),
                                 str(log)])

    def wait_for(line: str) -> None:
        end = time.monotonic() + 30
        while line not in log.read_text().splitlines():
            assert time.monotonic() < end, log.read_text()
            time.sleep(0.05)

    holder = start("shared", "holder", 2.0)
    wait_for("in holder")
    exclusive = start("exclusive", "exclusive", 0.1)
    wait_for("asks exclusive")
    time.sleep(0.3)  # it now waits behind the holder
    later = start("shared", "later", 0.1)
    wait_for("asks later")
    for proc in (holder, exclusive, later):
        assert proc.wait(30) == 0
    entered = [ln for ln in log.read_text().splitlines() if ln.startswith("in ")]
    assert entered == ["in holder", "in exclusive", "in later"]


def test_one_device_has_one_lock_whatever_the_cache(tmp_path, monkeypatch):
    """Two evaluations with caches of their own on one GPU still take turns to time."""
    monkeypatch.delenv(LOCKS_ENV, raising=False)
    gpu0 = device_lock(EvalOptions(cache_dir=tmp_path / "a", device="cuda:0"))
    assert gpu0 == device_lock(EvalOptions(cache_dir=tmp_path / "b", device="cuda:0"))
    assert tmp_path not in gpu0.parents
    assert gpu0 != device_lock(EvalOptions(cache_dir=tmp_path / "a", device="cuda:1"))
    assert gpu0 != device_lock(EvalOptions(cache_dir=tmp_path / "a"), gpu=False)
    monkeypatch.setenv(LOCKS_ENV, str(tmp_path / "locks"))
    assert device_lock(EvalOptions(cache_dir=tmp_path / "a")).parent == tmp_path / "locks"


def test_shared_holders_overlap(tmp_path):
    lock, inside, most = tmp_path / "dev.lock", [0], [0]
    guard = threading.Lock()

    def caller():
        with locked(lock, shared=True):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.2)
            with guard:
                inside[0] -= 1

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert most[0] == 3


class Recording:
    """An evaluator whose stages only record how many candidates are in a stage at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = self.most = 0
        self.ahead: list[tuple[str, str]] = []

    def compile(self, problem, code, backend, options) -> EvalResult:
        return EvalResult(status=Status.ok, backend=backend, problem_id=problem.id, code_hash=code)

    def correct(self, problem, code, backend, options, prior) -> EvalResult:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(0.1)
        with self.lock:
            self.now -= 1
        return prior

    def perform(self, problem, code, backend, options, prior) -> EvalResult:
        return prior

    def baselines(self, problem, backend, options) -> None:
        with self.lock:
            self.ahead.append((problem.id, backend))


def test_lanes_run_that_many_candidates_at_once_and_each_problem_is_baselined_once(relu, fast_options):
    ev = Recording()
    items = [(relu, f"code {i}", "cuda") for i in range(8)]
    got = dict(iter_evaluate(items, fast_options, devices=["cuda:0"], compile_workers=4,
                             evaluator=ev, lanes=3))
    assert sorted(got) == list(range(8)) and all(r.status == Status.ok for r in got.values())
    assert [got[i].code_hash for i in range(8)] == [f"code {i}" for i in range(8)]
    assert ev.most == 3
    assert ev.ahead == [(relu.id, "cuda")]


def test_another_evaluator_gets_one_lane_per_device_unless_asked(relu, fast_options):
    ev = Recording()
    items = [(relu, f"code {i}", "cuda") for i in range(4)]
    list(iter_evaluate(items, fast_options, devices=["cuda:0"], compile_workers=4, evaluator=ev))
    assert ev.most == 1
