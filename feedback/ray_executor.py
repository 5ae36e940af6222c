"""`RayEvaluator`: the evaluator's three stages on a Ray cluster, with the same `EvalResult`s.

    compile  -> a Ray task (`num_cpus=1`) on any node: `LocalEvaluator.compile` there
    correct  -> a `StageWorker` actor holding one GPU (`num_gpus=1`; cuda, triton) or one CPU
    perform     (cpp): `LocalEvaluator.correct` / `.perform` there, one call at a time

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
says how to set up a cluster.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import ray
from pydantic import BaseModel, ConfigDict, Field
from ray.exceptions import ObjectLostError, RayActorError, WorkerCrashedError

from feedback.environment import cuda_arch, host_environment
from feedback.evaluate import LocalEvaluator
from feedback.executor import ExecutorError
from feedback.options import Backend, EvalOptions, default_cache_dir
from feedback.result import EvalResult, Status
from problems.record import Problem

log = logging.getLogger("feedback.ray_executor")

COMPILE_RETRIES = 3
"""Ray re-runs a compile task whose worker process or node died this many times."""
CALL_RETRIES = 3
"""A correctness/timing call whose actor died runs again on another actor this many times."""
START_TIMEOUT_S = 600.0
"""How long the first actors of a pool may take to start (placement, worker start-up)."""
CUDA_FAULT = re.compile(r"CUDA error|cudaError|CUDA_ERROR|illegal memory access|"
                        r"device-side assert|unspecified launch failure|killed by signal",
                        re.IGNORECASE)
"""A runtime_error that may have left the device in a bad state (a CUDA error, or a device job
that died by a signal): the actor that ran it is replaced (by default on GPU backends only)."""
WORKER_LOST = (RayActorError, WorkerCrashedError, ObjectLostError)
Stage = Literal["correct", "perform"]


class EvaluationLost(RuntimeError):
    """A stage call lost its Ray worker more often than it may be retried (not the candidate's
    fault: the attempt is not stored, and a resume evaluates it again)."""


class WorkerInfo(BaseModel):
    """Who a stage actor is, as it reports itself once started."""

    model_config = ConfigDict(frozen=True)
    pid: int = Field(description="The actor's process id on its node.")
    node_id: str = Field(description="Ray node id of the actor's node.")
    hostname: str = Field(description="The node's host name.")
    device: str | None = Field(description="`cuda:N` (physical index) of its GPU; None on cpp.")
    arch: str | None = Field(description="TORCH_CUDA_ARCH_LIST of its GPU; None on cpp.")


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


class StageWorker:
    """A Ray actor that runs correctness and timing/profile on its node, one call at a time, on
    the GPU Ray gave it (cuda/triton) or on its node's CPU (cpp)."""

    def __init__(self, gpu: bool):
        ids = ray.get_gpu_ids() if gpu else []
        # Ray's GPU ids are the node's physical indices, which the evaluator's children select
        # with CUDA_VISIBLE_DEVICES (and nvidia-smi -i reads), as on a local run with cuda:N
        self.device = f"cuda:{ids[0]}" if ids else None

    def describe(self) -> WorkerInfo:
        return WorkerInfo(pid=os.getpid(), node_id=ray.get_runtime_context().get_node_id(),
                          hostname=socket.gethostname(), device=self.device,
                          arch=cuda_arch(self.device, None) if self.device else None)

    def run(self, stage: Stage, problem: Problem, code: str, backend: Backend,
            options: EvalOptions, prior: EvalResult) -> EvalResult:
        if self.device is not None:
            options = options.model_copy(update={"device": self.device})
        env = prior.environment
        if prior.status == Status.ok and (env is None or env.hostname != socket.gethostname()):
            # the previous stage ran on another node: this result describes where it runs now
            prior = prior.model_copy(update={"environment": host_environment(backend,
                                                                             options.device)})
        return getattr(LocalEvaluator(), stage)(problem, code, backend, options, prior)


class Admission(BaseModel):
    """Concurrent stage calls the cluster can take (the agent's gates use it)."""

    model_config = ConfigDict(frozen=True)
    compile_slots: int = Field(description="Compile tasks at once.")
    device_slots: int = Field(description="Correctness/timing calls at once (stage workers).")


@dataclass
class _Slot:
    actor: Any
    info: WorkerInfo


class ActorPool:
    """A fixed number of `StageWorker` actors; a call takes an idle one, and a dead or
    CUDA-faulted one is replaced by a new actor that joins once it has started.

    Args:
        size: actors to start (each holds one CPU and, when `gpu`, one GPU).
        gpu: the actors hold a GPU each (cuda, triton) or none (cpp).
        env: Ray runtime environment of the actors (`runtime_env()`).
        retries: times a call is run again after its actor died under it.
        start_timeout_s: limit for the first actors to start.
        replace_after_fault: replace the actor after a `CUDA_FAULT` result (default: when gpu).
    """

    def __init__(self, size: int, gpu: bool, env: dict[str, Any], retries: int = CALL_RETRIES,
                 start_timeout_s: float = START_TIMEOUT_S, replace_after_fault: bool | None = None):
        self.size, self._gpu, self._retries = size, gpu, retries
        self._replace_after_fault = gpu if replace_after_fault is None else replace_after_fault
        self._options = {"num_cpus": 1, "num_gpus": 1 if gpu else 0, "max_restarts": 0,
                         "runtime_env": env}
        self._idle: queue.Queue[_Slot] = queue.Queue()
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []
        self._closed = False
        self.replaced = 0
        """Actors replaced (died, or saw a CUDA error)."""
        self.retried = 0
        """Stage calls run again because their actor died under them."""
        for actor in [self._launch() for _ in range(size)]:
            self._idle.put(self._admit(actor, start_timeout_s))

    def _launch(self) -> Any:
        return ray.remote(StageWorker).options(**self._options).remote(self._gpu)

    def _admit(self, actor: Any, timeout_s: float | None) -> _Slot | None:
        """Wait until `actor` runs and add it to the pool (None: the pool closed meanwhile)."""
        try:
            info = ray.get(actor.describe.remote(), timeout=timeout_s)
        except ray.exceptions.GetTimeoutError as e:
            need = "a GPU" if self._gpu else "a CPU"
            raise ExecutorError(f"a stage worker needing {need} did not start within "
                                f"{timeout_s:.0f} s: is the Ray cluster short of resources? (see "
                                "`ray status`)") from e
        slot = _Slot(actor, info)
        with self._lock:
            if not self._closed:
                self._slots.append(slot)
                return slot
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)
        return None

    @property
    def arch(self) -> str | None:
        with self._lock:
            return self._slots[0].info.arch if self._slots else None

    def workers(self) -> list[WorkerInfo]:
        """The live actors (started, not replaced)."""
        with self._lock:
            return [s.info for s in self._slots]

    def call(self, stage: Stage, *args: Any) -> EvalResult:
        """Run `stage` on an idle actor; again on another one when the actor dies under it."""
        lost: Exception | None = None
        for attempt in range(self._retries + 1):
            slot = self._idle.get()
            try:
                result: EvalResult = ray.get(slot.actor.run.remote(stage, *args))
            except WORKER_LOST as e:
                lost = e
                log.warning("stage worker %s on %s lost during %s (%s); retrying on another",
                            slot.info.pid, slot.info.hostname, stage, type(e).__name__)
                self._replace(slot)
                if attempt < self._retries:
                    with self._lock:
                        self.retried += 1
                continue
            if self._replace_after_fault and result.status == Status.runtime_error \
                    and CUDA_FAULT.search(result.message):
                self._replace(slot)  # never reuse a worker whose device saw an error
            else:
                self._idle.put(slot)
            return result
        raise EvaluationLost(f"{stage} lost its Ray worker on each of {self._retries + 1} tries;"
                             f" last: {lost}")

    def _replace(self, slot: _Slot) -> None:
        """Retire `slot`'s actor and start a new one, which joins the idle ones once it runs
        (wherever Ray places it; it waits for resources when the cluster has none free)."""
        with self._lock:
            if slot in self._slots:
                self._slots.remove(slot)
            self.replaced += 1
        with contextlib.suppress(Exception):
            ray.kill(slot.actor, no_restart=True)

        def start() -> None:
            try:
                slot = self._admit(self._launch(), None)
            except BaseException:  # (Ray raises SystemExit here when it shuts down meanwhile)
                if not self._closed:  # logged; the pool goes on with the others
                    log.exception("a replacement stage worker did not start")
                return
            if slot is not None:
                self._idle.put(slot)

        threading.Thread(target=start, daemon=True, name="ray-stage-worker-start").start()

    def close(self) -> None:
        """Stop the actors (a replacement still starting is stopped once it runs)."""
        with self._lock:
            self._closed = True
            slots, self._slots = self._slots, []
        for slot in slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)


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
            ray.init(address=address, runtime_env=self.runtime_env)
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
                self._pools[gpu] = ActorPool(size, gpu, self.runtime_env, self._retries)
            return self._pools[gpu]

    def admission(self, backend: Backend) -> Admission:
        """How many stage calls to have in flight: a compile per CPU the cluster has beyond
        the stage workers' own, and one correctness/timing job per stage worker (queueing the
        rest on the driver keeps them off its threads)."""
        pool = self.pool(backend)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return Admission(compile_slots=max(1, cpus - pool.size), device_slots=pool.size)

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
        try:
            return ray.get(task.remote(problem, code, backend, options))
        except WORKER_LOST as e:
            raise EvaluationLost(f"compile lost its Ray worker on each of {COMPILE_RETRIES + 1} "
                                 f"tries: {e}") from e

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

    def close(self) -> None:
        """Stop this evaluator's actors (Ray itself stays up for the rest of the process)."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
