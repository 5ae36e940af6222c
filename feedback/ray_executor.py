"""`RayEvaluator`: the evaluator's three stages on a Ray cluster, with the same `EvalResult`s.

    compile   -> a Ray task (`num_cpus=1`) on any node: `LocalEvaluator.compile` there
    correct   -> a `StageWorker` actor holding one GPU (`num_gpus=1`; cuda, triton) or one CPU
    perform      (cpp): `LocalEvaluator.correct` / `.perform` / `.baselines` there, as many
    baselines    calls at once as a local batch runs per device (`ActorPool.lanes`)

The Ray side runs the same stage code as the local executor, so every sandbox, guard and cache
rule applies unchanged: each correctness/timing job is still a fresh child process that the actor
starts, and the actor itself never touches CUDA. After a CUDA error in a child the actor is
replaced anyway (a new process, on whichever node Ray picks), so no stage call ever follows a
CUDA fault in the same worker.

A lost worker or node loses no evaluation: a compile task is retried by Ray (`max_retries`); a
stage call whose actor died is run again on another actor of the pool while a replacement actor
starts (`CALL_RETRIES` times, then `EvaluationLost`). Stage calls are pure functions of their
arguments, so a retry changes nothing; the run store is written by the driver only, after the
call returned, once per attempt.

The compile cache is the driver's `KERNEL_REFINE_CACHE` (passed to every worker through the
runtime environment, and in `EvalOptions.cache_dir`): one shared cache when that path is on a
shared file system mounted at the same place on every node, one cache per node otherwise (then a
GPU node builds a candidate again when the compile task ran on another node). docs/scaling.md
says how to set up a cluster; `feedback.ray_workers` holds the actors and their pool.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import ray
from pydantic import BaseModel, ConfigDict, Field

from feedback.evaluate import LocalEvaluator
from feedback.executor import ExecutorError
from feedback.options import Backend, EvalOptions, default_cache_dir
from feedback.ray_workers import CALL_RETRIES, WORKER_LOST, ActorPool, EvaluationLost
from feedback.result import EvalResult, Status
from problems.record import Problem

log = logging.getLogger("feedback.ray_executor")

COMPILE_RETRIES = 3
"""Ray re-runs a compile task whose worker process or node died this many times."""
SLOW_S = 10.0
"""A compile task that took longer than this (seconds, as the driver waited) is logged."""


def runtime_env(cache_dir: Path | str) -> dict[str, Any]:
    """What every Ray task and actor inherits from the driver: the compile cache's path (the same
    path on every node: shared when it is a shared mount, per node otherwise) and CUDA_HOME."""
    env = {"KERNEL_REFINE_CACHE": str(Path(cache_dir).resolve())}
    if os.environ.get("CUDA_HOME"):
        env["CUDA_HOME"] = os.environ["CUDA_HOME"]
    return {"env_vars": env}


@ray.remote(num_cpus=1, max_retries=COMPILE_RETRIES)
def compile_task(problem: Problem, code: str, backend: Backend,
                 options: EvalOptions) -> EvalResult:
    """The compile stage on whichever node has a free CPU."""
    return LocalEvaluator().compile(problem, code, backend, options)


class Admission(BaseModel):
    """Concurrent stage calls the cluster can take (the agent's gates use it)."""

    model_config = ConfigDict(frozen=True)
    compile_slots: int = Field(description="Compile tasks at once.")
    device_slots: int = Field(description="Correctness/timing calls at once (the stage workers' "
                              "lanes).")


class RayEvaluator:
    """`feedback.api.Evaluator` on a Ray cluster (see the module docstring).

    Args:
        address: `auto`, `HOST:PORT`, or None (Ray's own choice: RAY_ADDRESS, else the cluster
            last started on this machine, else a new local Ray). Ray Client (`ray://`) is
            untested. Ignored when this process already called `ray.init`.
        actors: stage actors per pool; None = one per GPU of the cluster (cuda, triton), one for
            cpp.
        cache_dir: the compile cache the workers are told about (default: the driver's).
        retries: times a stage call is run again after losing its actor.
    """

    def __init__(self, address: str | None = None, *, actors: int | None = None,
                 cache_dir: Path | str | None = None, retries: int = CALL_RETRIES):
        self.runtime_env = runtime_env(cache_dir or default_cache_dir())
        if not ray.is_initialized():
            start = time.monotonic()
            ray.init(address=address, runtime_env=self.runtime_env)
            log.info("Ray up in %.1f s: %s", time.monotonic() - start, ray.cluster_resources())
        elif address:
            log.info("Ray already initialised in this process; --ray-address %s not used", address)
        self._actors, self._retries = actors, retries
        self._pools: dict[bool, ActorPool] = {}
        self._lock = threading.Lock()

    def pool(self, backend: Backend) -> ActorPool:
        """The actor pool for `backend` (GPU actors for cuda/triton, CPU actors for cpp),
        started on first use."""
        gpu = backend != "cpp"
        with self._lock:
            if gpu not in self._pools:
                size = self._actors or (int(ray.cluster_resources().get("GPU", 0)) if gpu else 1)
                if size < 1:
                    raise ExecutorError(f"backend {backend} needs GPUs and the Ray cluster has "
                                        "none (`ray status` lists its resources)")
                start = time.monotonic()
                self._pools[gpu] = ActorPool(size, gpu, self.runtime_env, self._retries)
                log.info("%d stage worker(s) for %s started in %.1f s", size, backend,
                         time.monotonic() - start)
            return self._pools[gpu]

    def admission(self, backend: Backend) -> Admission:
        """How many stage calls to have in flight: a compile per CPU the cluster has beyond
        the stage workers' own, and one correctness/timing call per lane of each stage worker
        (queueing the rest on the driver keeps them off its threads)."""
        pool = self.pool(backend)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return Admission(compile_slots=max(1, cpus - pool.size),
                         device_slots=pool.size * pool.lanes)

    def _targeted(self, backend: Backend, options: EvalOptions) -> EvalOptions:
        """Options whose CUDA arch is the actors' GPUs', so a compile task on a node without
        that GPU builds what the GPU nodes load (and the same cache key)."""
        if backend == "cpp" or options.arch is not None:
            return options
        return options.model_copy(update={"arch": self.pool(backend).arch})

    def compile(self, problem: Problem, code: str, backend: Backend,
                options: EvalOptions) -> EvalResult:
        options = self._targeted(backend, options)
        task = compile_task.options(runtime_env=self.runtime_env)
        start = time.monotonic()
        try:
            result = ray.get(task.remote(problem, code, backend, options))
        except WORKER_LOST as e:
            raise EvaluationLost(f"compile lost its Ray worker on each of {COMPILE_RETRIES + 1} "
                                 f"tries: {e}") from e
        wall = time.monotonic() - start
        if wall > SLOW_S:  # where a slow sweep's time goes: the build, or Ray around it
            log.info("compile task of %s: %.1f s (the build itself %.1f s)", problem.id, wall,
                     result.stage_seconds.get("compile", 0.0))
        return result

    def correct(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        if prior.status != Status.ok:
            return prior
        return self.pool(backend).call("correct", problem, code, backend,
                                       self._targeted(backend, options), prior)

    def perform(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        if prior.status != Status.ok or not (options.time or options.profile):
            return prior
        return self.pool(backend).call("perform", problem, code, backend,
                                       self._targeted(backend, options), prior)

    def baselines(self, problem: Problem, backend: Backend, options: EvalOptions) -> None:
        """Time `problem`'s baselines into the stage workers' cache ahead of its candidates
        (`LocalEvaluator.baselines`; a batch does this while its candidates build)."""
        self.pool(backend).call("baselines", problem, backend, self._targeted(backend, options))

    def close(self) -> None:
        """Stop this evaluator's actors (Ray itself stays up for the rest of the process)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
