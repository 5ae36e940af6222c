"""The parent trusts a worker's report only from its own channel: exit 0, hello with the nonce,
one valid report for this job.

A stand-in worker (a few lines of Python, no torch) plays each way a child can end.
"""

from __future__ import annotations

import sys

import pytest

from feedback import job as job_module
from feedback.job import DEVICE_WAIT_SAID, WorkerJob, launch
from feedback.options import EvalOptions
from feedback.result import Status

# Speaks the worker's side of the contract: the job from a file (`WORKER JOB.json`, results at
# `job["result_path"]`) or, with `--channel FD`, from stdin with a hello frame then the report on FD.
PRELUDE = """
import json, os, sys, time
READY_AT = CONTEXT_AT = SIGNAL = GO = None
if "--standby" in sys.argv:  # a standby worker: its "imports" take IMPORT_S, then it says so
    SIGNAL, GO = (int(a) for a in sys.argv[sys.argv.index("--standby") + 1:][:2])
    from feedback.worker import handoff  # imported ahead, as the worker's own imports are
    time.sleep(IMPORT_S)
    READY_AT = time.time()
    os.write(SIGNAL, b"R")
    import select  # a GPU job's parent asks for the CUDA context before it delivers the job
    if GO in select.select([0, GO], [], [])[0] and os.read(GO, 1) == b"C":
        CONTEXT_AT = time.time()
        os.write(SIGNAL, b"C")
if "--channel" in sys.argv:
    fd = int(sys.argv[sys.argv.index("--channel") + 1])
    job = json.loads(sys.stdin.read())
    def send(report, hello=None):
        hi = {"hello": job["nonce"] if hello is None else hello, "kind": job["kind"], "role": job["role"]}
        w = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_APPEND)  # fd is read-only
        os.write(w, (json.dumps(hi) + "\\n" + json.dumps(report) + "\\n").encode())
else:
    job = json.load(open(sys.argv[1]))
    def send(report, hello=None):
        json.dump(report if hello is None else {**report, "nonce": hello}, open(job["result_path"], "w"))
def report(**fields):
    return {"nonce": job["nonce"], "kind": job["kind"], "role": job["role"],
            "problem_id": job["problem"]["id"], "status": "mismatch", **fields}
"""


def stand_in(monkeypatch, body: str, import_s: float = 0.0) -> None:
    """Make the worker's command run `body` after PRELUDE (which defines `job`, `send`, `report`
    and READY_AT, when a standby worker said it was ready)."""
    script = f"IMPORT_S = {import_s}\n" + PRELUDE + body
    monkeypatch.setattr(job_module, "worker_entry", lambda: [sys.executable, "-c", script])


def lock_asks(monkeypatch) -> list[float]:
    """When each device lock is asked for (`time.time()`), in order, from now on."""
    import contextlib
    import time

    asked, real = [], job_module.locked

    @contextlib.contextmanager
    def traced(path, shared=False):
        asked.append(time.time())
        with real(path, shared):
            yield

    monkeypatch.setattr(job_module, "locked", traced)
    return asked


def run(relu, tmp_path, timeout_s: float = 20):
    options = EvalOptions(cache_dir=tmp_path / "cache")
    return launch("correct", relu, "cpp", options, candidate=None,
                  extensions_dir=tmp_path / "ext", arch=None, gpu_index=None, timeout_s=timeout_s)


REPORT = "send(report(message='values differ'))\n"


def test_a_valid_report_is_trusted(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, REPORT)
    got = run(relu, tmp_path)
    assert got.trusted and got.report.status == Status.mismatch
    assert got.report.message == "values differ"


@pytest.mark.parametrize("body,status,words", [
    ("send(report(), hello='guessed')\n", Status.runtime_error, "forged or missing result"),
    ("send({'nonce': job['nonce']})\n", Status.runtime_error, "forged or missing result"),
    ("print('all good')\n", Status.runtime_error, "forged or missing result"),
    (REPORT + "os._exit(4)\n", Status.runtime_error, "exited with status 4 after writing its report"),
    ("os._exit(3)\n", Status.runtime_error, "exited with status 3"),  # not the worker's own
    (f"import sys\nsys.stderr.write({DEVICE_WAIT_SAID + ' 10 s'!r})\nos._exit(3)\n", Status.timeout,
     "timed out waiting for the device"),  # DEVICE_WAIT_EXIT, said by the worker's watchdog
    ("import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", Status.runtime_error, "SIGSEGV"),
    ("import time\ntime.sleep(60)\n", Status.timeout, "timed out after 3 s"),
    ("raise ValueError('boom in the worker')\n", Status.runtime_error, "boom in the worker"),
])
def test_anything_else_is_a_value_not_an_exception(monkeypatch, relu, tmp_path, body, status, words):
    stand_in(monkeypatch, body)
    got = run(relu, tmp_path, timeout_s=3)
    assert not got.trusted and got.report.status == status
    assert words in got.report.message


def test_the_job_file_carries_the_contract(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, REPORT)
    seen = {}
    real = job_module.run_job

    def spy(job: WorkerJob, **kw):
        seen["job"], seen["kw"] = job, kw
        return real(job, **kw)
    monkeypatch.setattr(job_module, "run_job", spy)
    assert run(relu, tmp_path).trusted
    job, kw = seen["job"], seen["kw"]
    assert job.kind == "correct" and len(job.nonce) >= 24
    assert not list(tmp_path.rglob("job.json"))  # the job never lands in a file the child can open
    assert kw["env"]["HOME"] == job.scratch_dir and "SECRET" not in " ".join(kw["env"])
    assert kw["env"]["CUDA_VISIBLE_DEVICES"] == ""  # a cpp child sees no GPU


def test_a_standby_worker_serves_the_next_job_and_is_ended_after(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    with job_module.standby_workers(cpu=True):
        first, second = run(relu, tmp_path), run(relu, tmp_path)
        waiting = list(job_module._POOL.waiting.values())
        assert len(waiting) == 1 and waiting[0].usable()  # the one for the next job
    assert first.trusted and second.trusted
    assert "kr-correct-" in first.report.message      # the first job starts its own worker
    assert "kr-standby-" in second.report.message     # the second finds one waiting
    assert not job_module._POOL.waiting and not waiting[0].child.alive()
    assert not waiting[0].scratch.exists()


def test_a_candidates_last_job_leaves_no_worker_waiting_unless_another_shares_its_spec(
        monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    options = EvalOptions(cache_dir=tmp_path / "cache")

    def job(kind: str, options: EvalOptions = options):
        return launch(kind, relu, "cpp", options, candidate=None, extensions_dir=tmp_path / "ext",
                      arch=None, gpu_index=None, timeout_s=20)
    with job_module.standby_workers(cpu=True):
        job("correct")
        assert len(job_module._POOL.waiting) == 1  # for the candidate's time job
        last = job("time")
        assert "kr-standby-" in last.report.message and not job_module._POOL.waiting
        profiled = options.model_copy(update={"profile": True})
        job("time", profiled)  # a profile job comes after it: a worker waits for that one
        assert len(job_module._POOL.waiting) == 1
        job("profile", profiled)
        assert not job_module._POOL.waiting
        job("correct", options.model_copy(update={"time": False}))  # nothing after it
        assert not job_module._POOL.waiting
        # two unfinished candidates of a batch with these extension sources: the second's
        # correctness job may come after the first's last job
        for change in (1, 1):
            job_module.standby_unfinished(tmp_path / "ext", change)
        job("time")
        assert len(job_module._POOL.waiting) == 1
        job_module.standby_unfinished(tmp_path / "ext", -1)  # the first has its result
        second = job("correct", options.model_copy(update={"time": False}))
        assert "kr-standby-" in second.report.message and not job_module._POOL.waiting
    assert not job_module._POOL.unfinished  # a batch's counts end with the block


def test_without_the_block_every_job_starts_its_own_worker(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    got = [run(relu, tmp_path) for _ in range(2)]
    assert all("kr-correct-" in g.report.message for g in got)
    assert not job_module._POOL.waiting


def test_a_standby_that_died_is_replaced_by_a_fresh_worker(monkeypatch, relu, tmp_path):
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    with job_module.standby_workers(cpu=True):
        run(relu, tmp_path)
        next(iter(job_module._POOL.waiting.values())).child.kill()
        got = run(relu, tmp_path)
    assert got.trusted and "kr-correct-" in got.report.message


def test_a_standby_workers_time_limit_counts_from_its_job(monkeypatch, relu, tmp_path):
    import time

    stand_in(monkeypatch, "import time\ntime.sleep(60)\n")
    with job_module.standby_workers(cpu=True):
        run(relu, tmp_path, timeout_s=3)
        time.sleep(4)  # the standby waits longer than the limit before its job arrives
        got = run(relu, tmp_path, timeout_s=3)
    assert got.report.status == Status.timeout
    assert 2.9 <= got.outcome.wall_s < 6, got.outcome.wall_s


def test_a_gpu_job_starts_its_worker_before_it_waits_for_the_device(monkeypatch, relu, tmp_path):
    """Without the block too: the process start and imports overlap the wait for the device
    lock; a cpp job (its imports would share the CPU with a cpp timing) starts after it."""
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    options = EvalOptions(cache_dir=tmp_path / "cache")
    common = {"candidate": None, "extensions_dir": tmp_path / "ext", "arch": None,
              "timeout_s": 20, "device_lock": tmp_path / "dev.lock"}
    gpu = launch("correct", relu, "cuda", options, gpu_index=0, **common)
    cpu = launch("correct", relu, "cpp", options, gpu_index=None, **common)
    assert gpu.trusted and "kr-standby-" in gpu.report.message
    assert cpu.trusted and "kr-correct-" in cpu.report.message
    assert not job_module._POOL.waiting


def test_a_gpu_jobs_worker_makes_its_cuda_context_before_the_job_asks_for_the_device(
        monkeypatch, relu, tmp_path):
    """Whether started for the job or kept waiting for it, a GPU job's worker is asked for its
    CUDA context once ready, and the device is asked for after it answers; a worker kept waiting
    is not asked before it serves a job (it holds no device memory); a cpp job's never."""
    stand_in(monkeypatch, "send(report(message=repr(CONTEXT_AT)))\n")
    asked = lock_asks(monkeypatch)
    common = {"candidate": None, "extensions_dir": tmp_path / "ext", "arch": None,
              "timeout_s": 20, "device_lock": tmp_path / "dev.lock"}
    options = EvalOptions(cache_dir=tmp_path / "cache")
    with job_module.standby_workers(cpu=True):
        first = launch("correct", relu, "cuda", options, gpu_index=0, **common)
        kept = next(iter(job_module._POOL.waiting.values()))
        assert kept.ready is False and kept.context is False  # not asked while it waits
        second = launch("correct", relu, "cuda", options, gpu_index=0, **common)  # the kept one
        cpu = [launch("correct", relu, "cpp", options, gpu_index=None, **common) for _ in "ab"]
    for run, lock_asked in ((first, asked[0]), (second, asked[1])):
        assert run.trusted and run.report.message != "None"
        assert lock_asked >= float(run.report.message)  # the context came first
    assert job_module.standby_served() >= 2  # the second GPU job and the second cpp job
    assert [c.report.message for c in cpu] == ["None", "None"]


def test_the_worker_makes_its_context_when_asked_and_a_failing_one_is_left_to_the_job(
        monkeypatch, relu, tmp_path):
    """The real worker, asked for its CUDA context on a host without a usable GPU: making it
    fails quietly, it answers all the same, and the job's own first use of the device says what
    is wrong."""
    answered, real = [], job_module._Standby.make_context

    def spy(self, limit_s: float = job_module.READY_S) -> None:
        real(self, limit_s)
        answered.append(self.context)

    monkeypatch.setattr(job_module._Standby, "make_context", spy)
    run = launch("correct", relu, "cuda", EvalOptions(cache_dir=tmp_path / "cache"),
                 candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=0,
                 timeout_s=120, device_lock=tmp_path / "dev.lock")
    assert run.trusted and run.report.status == Status.runtime_error, run.report.message
    assert "needs a CUDA device" in run.report.message
    assert answered == [True]  # asked once, answered before the job was delivered


def test_a_gpu_job_asks_for_the_device_only_once_its_worker_is_ready(monkeypatch, relu, tmp_path):
    """The worker's imports happen before the device lock is held, never while holding it."""
    stand_in(monkeypatch, "send(report(message=repr(READY_AT)))\n", import_s=1.5)
    asked = lock_asks(monkeypatch)
    run = launch("correct", relu, "cuda", EvalOptions(cache_dir=tmp_path / "cache"),
                 candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=0,
                 timeout_s=20, device_lock=tmp_path / "dev.lock")
    assert run.trusted and run.report.message != "None"
    assert asked and asked[0] >= float(run.report.message)  # the lock was asked for after ready


# the worker's own handoff (feedback/worker/handoff.py) around the "timed part" of a time job
HANDOFF = """
marks = {}
handoff.attach(job, SIGNAL, GO)
if handoff._PIPES:
    marks["set_up"] = time.time()
handoff.shared()
if marks:
    marks["prepared"] = time.time()
handoff.exclusive()
if marks:
    marks["go"] = time.time()
send(report(message=json.dumps(marks)))
"""


def time_job(relu, tmp_path, role: str, timeout_s: float = 20, alone: bool = False):
    return launch("time", relu, "cuda", EvalOptions(cache_dir=tmp_path / "cache"), role=role,
                  candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=0,
                  timeout_s=timeout_s, device_lock=tmp_path / "dev.lock", alone=alone)


@pytest.mark.parametrize("role", ["compiled", "baselines"])
def test_a_references_time_job_prepares_with_the_device_shared(monkeypatch, relu, tmp_path,
                                                               holds, role):
    """Its set-up that needs no device holds nothing, the rest of its set-up (no candidate code
    in that process) shares the device with correctness jobs; only its timed part holds it
    alone."""
    import json

    stand_in(monkeypatch, HANDOFF)
    run = time_job(relu, tmp_path, role)
    marks = json.loads(run.report.message)
    assert run.trusted and [h["shared"] for h in holds] == [True, False]
    shared, alone = holds
    assert marks["set_up"] <= shared["got"] <= marks["prepared"] <= shared["left"]
    assert shared["left"] <= alone["got"] <= marks["go"]


def test_a_candidates_time_job_prepares_shared_too(monkeypatch, relu, tmp_path, holds):
    """Its trusted set-up shares the device as a reference's does (the worker imports the
    candidate only once it holds the device alone: test_worker_handoff.py)."""
    import json

    stand_in(monkeypatch, HANDOFF)
    run = time_job(relu, tmp_path, "candidate")
    assert run.trusted and set(json.loads(run.report.message)) == {"set_up", "prepared", "go"}
    assert [h["shared"] for h in holds] == [True, False]


def test_a_late_ready_or_context_word_does_not_stand_for_the_time_jobs_shared(monkeypatch, relu,
                                                                             tmp_path, holds):
    """Words that came after the parent stopped waiting for them (a worker whose imports or
    context outlasted READY_S) are passed over; the job's own words are answered as ever."""
    import json

    stand_in(monkeypatch, "os.write(SIGNAL, b'R'); os.write(SIGNAL, b'C')\n" + HANDOFF)
    run = time_job(relu, tmp_path, "candidate")
    assert run.trusted and set(json.loads(run.report.message)) == {"set_up", "prepared", "go"}
    assert [h["shared"] for h in holds] == [True, False]


def test_a_time_job_run_again_alone_holds_the_device_alone_through_its_set_up(monkeypatch, relu,
                                                                              tmp_path, holds):
    """Run again after it ran short of memory beside other jobs (evaluate._run_sure): its set-up
    shares the device with no one, and its words are answered at once (no hang on its pipes)."""
    import json

    stand_in(monkeypatch, HANDOFF)
    run = time_job(relu, tmp_path, "candidate", alone=True)
    marks = json.loads(run.report.message)
    assert run.trusted and [h["shared"] for h in holds] == [False]
    (alone,) = holds
    assert alone["got"] <= marks["set_up"] <= marks["prepared"] <= marks["go"] <= alone["left"]


def test_a_correctness_job_shares_the_device_throughout(monkeypatch, relu, tmp_path, holds):
    stand_in(monkeypatch, HANDOFF)
    run = launch("correct", relu, "cuda", EvalOptions(cache_dir=tmp_path / "cache"),
                 candidate=None, extensions_dir=tmp_path / "ext", arch=None, gpu_index=0,
                 timeout_s=20, device_lock=tmp_path / "dev.lock")
    assert run.trusted and run.report.message == "{}"  # no handoff: the pipes were not its
    assert [h["shared"] for h in holds] == [True]


def test_the_wait_for_the_device_between_the_two_parts_is_not_run_time(monkeypatch, relu, tmp_path):
    """A prepared reference waiting behind other jobs is not timed out for it."""
    import threading
    import time

    stand_in(monkeypatch, HANDOFF)
    inside = threading.Event()

    def other_job():  # a correctness job that holds the device for longer than the limit
        with job_module.locked(tmp_path / "dev.lock", shared=True):
            inside.set()
            time.sleep(8)

    other = threading.Thread(target=other_job)
    other.start()
    assert inside.wait(5)
    run = time_job(relu, tmp_path, "eager", timeout_s=6)
    other.join()
    assert run.trusted and run.report.status == Status.mismatch, run.report.message
    assert 0 < run.outcome.wall_s < 6


def test_waiting_workers_are_kept_for_the_most_recent_specs_only(monkeypatch, relu, tmp_path):
    """Each candidate's jobs have a spec of their own (its extensions folder): a long batch must
    not keep one idle worker per candidate until its end."""
    stand_in(monkeypatch, "send(report(message=os.environ['HOME']))\n")
    monkeypatch.setattr(job_module, "MAX_WAITING", 3)
    options = EvalOptions(cache_dir=tmp_path / "cache")
    with job_module.standby_workers(cpu=True):
        for i in range(6):
            got = launch("correct", relu, "cpp", options, candidate=None,
                         extensions_dir=tmp_path / f"ext{i}", arch=None, gpu_index=None,
                         timeout_s=20)
            assert got.trusted
        waiting = list(job_module._POOL.waiting.values())
        assert len(waiting) == 3 and all(w.usable() for w in waiting)
    assert not job_module._POOL.waiting


@pytest.mark.parametrize("role", ["compiled", "baselines"])
def test_an_autotuning_compile_holds_the_device_alone_throughout(monkeypatch, relu, tmp_path,
                                                                 holds, role):
    """max-autotune times its choices on the device while it compiles: not with others on it."""
    stand_in(monkeypatch, HANDOFF)
    run = launch("time", relu, "cuda",
                 EvalOptions(cache_dir=tmp_path / "cache", compile_mode="max-autotune"),
                 role=role, candidate=None, extensions_dir=tmp_path / "ext", arch=None,
                 gpu_index=0, timeout_s=20, device_lock=tmp_path / "dev.lock")
    assert run.trusted and run.report.message == "{}"
    assert [h["shared"] for h in holds] == [False]


def test_only_a_reference_compiling_job_imports_torch_compile_ahead_and_shares_inductors_cache(
        monkeypatch, relu, tmp_path):
    """Its own spec, so the worker waiting for it imports torch.compile's modules before it says
    it is ready (feedback/worker/run.py); no other job's worker pays for them. Every other job, a
    candidate's own torch.compile above all, keeps Inductor's cache in its scratch folder (nothing
    it writes reaches a baseline's compile). Every job compiles in its own process: no pool of
    compile processes left running after a candidate's forward(), nor started for a baseline's
    few kernels on a host whose CPUs the builds need."""
    stand_in(monkeypatch, "send(report(message='|'.join(os.environ.get(k, '-') for k in "
                          f"({job_module.AHEAD_ENV!r}, 'TORCHINDUCTOR_CACHE_DIR', "
                          "'TORCHINDUCTOR_COMPILE_THREADS'))))\n")
    roles = ("compiled", "baselines", "eager", "candidate")
    got = {role: time_job(relu, tmp_path, role) for role in roles}
    assert all(run.trusted for run in got.values())
    shared = str((tmp_path / "cache").resolve() / "inductor")
    assert {role: run.report.message for role, run in got.items()} == {
        "compiled": f"compile|{shared}|1", "baselines": f"compile|{shared}|1",
        "eager": "-|-|1", "candidate": "-|-|1"}

