"""The Ray executor on a local Ray instance (2 CPUs, no GPU), cpp backend: the same results as
the local executor, the fault policy, the cache handed to the workers. (A worker killed mid-run:
tests/experiments/test_sweep_ray.py; a node lost mid-batch: test_ray_node_loss.py.)

The candidates reuse the OPS_CPP build of the other evaluator tests (they differ in Python only),
so a warm cache makes every build an import.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

import pytest
import ray
from candidates import BROKEN_CPP, cpp_candidate, deterministic

from feedback.evaluate import evaluate
from feedback.executor import ExecutorError
from feedback.ray_executor import RayEvaluator, runtime_env
from feedback.ray_workers import ActorPool, EvaluationLost
from feedback.result import Status

pytestmark = pytest.mark.slow

CASES = {"ok": (cpp_candidate("relu"), Status.ok),
         "wrong": (cpp_candidate("relu_wrong"), Status.mismatch),
         "broken": (cpp_candidate(source=BROKEN_CPP), Status.compile_error)}


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False)  # never a running cluster
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def options(fast_options):
    return fast_options.model_copy(update={"compile_baseline": False, "timing_trials": 10,
                                           "run_timeout_s": 60})


def test_same_results_as_the_local_executor(local_ray, relu, options):
    ev = RayEvaluator(actors=1)
    try:
        remote = {name: evaluate(relu, code, "cpp", options, evaluator=ev)
                  for name, (code, _) in CASES.items()}
        workers = ev.pool("cpp").workers()
    finally:
        ev.close()
    local = {name: evaluate(relu, code, "cpp", options) for name, (code, _) in CASES.items()}
    assert {n: r.status for n, r in remote.items()} == {n: s for n, (_, s) in CASES.items()}, \
        {n: r.message[:300] for n, r in remote.items()}
    assert {n: deterministic(r) for n, r in remote.items()} == \
        {n: deterministic(r) for n, r in local.items()}
    assert remote["ok"].runtime is not None and remote["ok"].speedup_eager is not None
    # the stages really ran in a Ray actor, not in this process
    assert len(workers) == 1 and workers[0].pid != os.getpid() and workers[0].device is None


@contextlib.contextmanager
def one_actor(relu, options, **pool_options):
    """A pool of one cpp actor (`ActorPool` options) and the arguments of a correctness call of
    the ReLU candidate, built (timing off)."""
    opts = options.model_copy(update={"time": False})
    code = cpp_candidate("relu")
    ev = RayEvaluator(actors=1)
    pool = ActorPool(1, False, ev.runtime_env, **pool_options)
    try:
        yield pool, (relu, code, "cpp", opts, ev.compile(relu, code, "cpp", opts))
    finally:
        pool.close()
        ev.close()


def test_a_worker_whose_job_died_by_a_signal_is_replaced(local_ray, relu, options):
    """The GPU executor's fault policy (a device job that crashed may have left the device in a
    bad state: never reuse its actor), exercised here on CPU actors."""
    opts = options.model_copy(update={"time": False})
    ev = RayEvaluator(actors=1)
    pool = ActorPool(1, False, ev.runtime_env, replace_after_fault=True)
    try:
        (first,) = pool.workers()
        results = []
        for name in ("crash", "relu"):
            code = cpp_candidate(name)
            built = ev.compile(relu, code, "cpp", opts)
            results.append(pool.call("correct", relu, code, "cpp", opts, built))
        (second,) = pool.workers()
    finally:
        pool.close()
        ev.close()
    crashed, fine = results
    assert crashed.status == Status.runtime_error and "killed by signal" in crashed.message, \
        crashed.message
    assert fine.status == Status.ok, fine.message
    assert pool.replaced == 1 and pool.retried == 0 and second.pid != first.pid


def test_a_call_that_loses_every_worker_is_an_error_not_a_result(local_ray, relu, options):
    """Past its retries a lost call raises (the trajectory ends, a resume redoes the turn): it
    never becomes a result that would blame the candidate."""
    with one_actor(relu, options, retries=0) as (pool, call):
        (worker,) = pool.workers()
        os.kill(worker.pid, signal.SIGKILL)  # the actor's process, started by this test
        with pytest.raises(EvaluationLost, match="lost its Ray worker on each of 1 tries"):
            pool.call("correct", *call)
    assert pool.replaced == 1 and pool.retried == 0


@pytest.mark.timeout(180)  # a pool that lost its only actor would wait for it forever
def test_an_evaluator_error_in_an_actor_is_raised_and_the_actor_kept(local_ray, relu, options):
    opts = options.model_copy(update={"time": False})
    code = cpp_candidate("relu")
    ev = RayEvaluator(actors=1)
    try:
        pool = ev.pool("cpp")
        built = ev.compile(relu, code, "cpp", opts)
        with pytest.raises(ray.exceptions.RayTaskError):  # (no prior result: a caller's bug)
            pool.call("correct", relu, code, "cpp", opts, None)
        assert pool.call("correct", relu, code, "cpp", opts, built).status == Status.ok
    finally:
        ev.close()
    assert pool.replaced == 0 and pool.retried == 0


def test_a_gpu_backend_on_a_cluster_without_gpus_is_a_clear_error(local_ray):
    ev = RayEvaluator()
    with pytest.raises(ExecutorError, match="backend cuda needs GPUs and the Ray cluster has none"):
        ev.pool("cuda")


def test_workers_get_the_drivers_cache(local_ray, cache_dir):
    env = runtime_env(cache_dir)
    assert env["env_vars"]["KERNEL_REFINE_CACHE"] == str(cache_dir.resolve())

    @ray.remote(num_cpus=1)
    def seen() -> str:
        from feedback.options import default_cache_dir

        return str(default_cache_dir())

    assert ray.get(seen.options(runtime_env=env).remote()) == str(cache_dir.resolve())


@pytest.mark.timeout(300)
def test_an_actor_runs_as_many_calls_at_once_as_it_has_lanes(local_ray, relu, options):
    """Lanes: one actor answers while a call runs on it, a free lane per call, and an actor that
    dies under two calls is replaced once, both calls running again on its replacement."""
    import threading

    with one_actor(relu, options, lanes=2) as (pool, call):
        assert pool.lanes == 2 and pool._idle.qsize() == 2
        (first,) = pool.workers()
        results: list = []
        calls = [threading.Thread(target=lambda: results.append(pool.call("correct", *call)))
                 for _ in range(2)]

        def taken(lanes: int) -> bool:
            deadline = time.monotonic() + 60
            while pool._idle.qsize() > 2 - lanes and time.monotonic() < deadline:
                time.sleep(0.05)
            return pool._idle.qsize() == 2 - lanes

        calls[0].start()
        assert taken(1)
        # its other lane is free in the actor too: it answers at once beside the running call
        assert ray.get(pool._slots[0].actor.describe.remote(), timeout=5).pid == first.pid
        assert calls[0].is_alive()
        calls[1].start()
        assert taken(2)
        os.kill(first.pid, signal.SIGKILL)  # both calls lose it; it is replaced once
        for thread in calls:
            thread.join(240)
        (second,) = pool.workers()
    assert [r.status for r in results] == [Status.ok, Status.ok], [r.message[:300] for r in results]
    assert pool.replaced == 1 and pool.retried == 2 and second.pid != first.pid


def test_baselines_are_timed_by_a_stage_worker_into_the_cache(local_ray, relu, options):
    from feedback import cache
    from feedback.environment import host_environment, known_device

    device = known_device(host_environment("cpp", options.device))
    record = cache.reference_path(options, relu, "time", "eager", "cpp", device)
    record.unlink(missing_ok=True)
    ev = RayEvaluator(actors=1)
    try:
        ev.baselines(relu, "cpp", options)
        (worker,) = ev.pool("cpp").workers()
    finally:
        ev.close()
    assert record.exists() and worker.pid != os.getpid()
