"""The correctness/timing side of the Ray executor: `StageWorker` actors and the `ActorPool`
that keeps a fixed number of them, retries a call whose actor died on another one, and replaces
dead or faulted actors (see `feedback.ray_executor` for the whole executor).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import re
import socket
import threading
from dataclasses import dataclass
from typing import Any, Literal

import ray
from pydantic import BaseModel, ConfigDict, Field
from ray.exceptions import ObjectLostError, RayActorError, WorkerCrashedError

from feedback.environment import cuda_arch, host_environment
from feedback.evaluate import GPU_LANES, LocalEvaluator
from feedback.executor import ExecutorError
from feedback.job import standby_workers
from feedback.options import Backend, EvalOptions
from feedback.result import EvalResult, Status
from problems.record import Problem

log = logging.getLogger("feedback.ray_workers")

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
Stage = Literal["correct", "perform", "baselines"]


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


class StageWorker:
    """A Ray actor that runs correctness, timing/profile and baselines on its node, on the GPU
    Ray gave it (cuda/triton) or on its node's CPU (cpp): up to its pool's `lanes` calls at once
    (a threaded actor), as a local batch runs `GPU_LANES` candidates per GPU; the evaluator's
    device lock keeps each timing alone on the device. Its device jobs' workers are started
    ahead, as in a local batch (`standby_workers`), for the actor's lifetime."""

    def __init__(self, gpu: bool):
        ids = ray.get_gpu_ids() if gpu else []
        # Ray's GPU ids are the node's physical indices, which the evaluator's children select
        # with CUDA_VISIBLE_DEVICES (and nvidia-smi -i reads), as on a local run with cuda:N
        self.device = f"cuda:{ids[0]}" if ids else None
        self._standby = contextlib.ExitStack()
        self._standby.enter_context(standby_workers())  # left when the actor's process ends

    def describe(self) -> WorkerInfo:
        return WorkerInfo(pid=os.getpid(), node_id=ray.get_runtime_context().get_node_id(),
                          hostname=socket.gethostname(), device=self.device,
                          arch=cuda_arch(self.device, None) if self.device else None)

    def _here(self, options: EvalOptions) -> EvalOptions:
        """`options` on this actor's GPU (cpp: as they are)."""
        return options if self.device is None else options.model_copy(
            update={"device": self.device})

    def run(self, stage: Stage, problem: Problem, code: str, backend: Backend,
            options: EvalOptions, prior: EvalResult) -> EvalResult:
        options = self._here(options)
        env = prior.environment
        if prior.status == Status.ok and (env is None or env.hostname != socket.gethostname()):
            # the previous stage ran on another node: this result describes where it runs now
            prior = prior.model_copy(update={"environment": host_environment(backend,
                                                                             options.device)})
        return getattr(LocalEvaluator(), stage)(problem, code, backend, options, prior)

    def baselines(self, problem: Problem, backend: Backend, options: EvalOptions) -> None:
        """`LocalEvaluator.baselines` on this actor's device: a batch's problems' baselines timed
        into the node's cache ahead of their candidates."""
        LocalEvaluator().baselines(problem, backend, self._here(options))


@dataclass(eq=False)
class _Slot:
    actor: Any
    info: WorkerInfo
    running: int = 0  # its calls in flight
    retired: bool = False  # out of the pool: ended once `running` is back to 0


class ActorPool:
    """A fixed number of `StageWorker` actors, each taking up to `lanes` calls at once; a call
    takes a free lane, and a dead or CUDA-faulted actor is replaced by a new one that joins once
    it has started.

    Args:
        size: actors to start (each holds one CPU and, when `gpu`, one GPU).
        gpu: the actors hold a GPU each (cuda, triton) or none (cpp).
        env: Ray runtime environment of the actors (`runtime_env()`).
        retries: times a call is run again after its actor died under it.
        start_timeout_s: limit for the first actors to start.
        replace_after_fault: replace the actor after a `CUDA_FAULT` result (default: when gpu).
        lanes: calls at once per actor (default: a local batch's `GPU_LANES` on GPU actors, 1
            on cpp, where a timing has the host's cores to itself).
    """

    def __init__(self, size: int, gpu: bool, env: dict[str, Any], retries: int = CALL_RETRIES,
                 start_timeout_s: float = START_TIMEOUT_S, replace_after_fault: bool | None = None,
                 lanes: int | None = None):
        self.size, self._gpu, self._retries = size, gpu, retries
        self.lanes = lanes or (GPU_LANES if gpu else 1)
        self._replace_after_fault = gpu if replace_after_fault is None else replace_after_fault
        self._options = {"num_cpus": 1, "num_gpus": 1 if gpu else 0, "max_restarts": 0,
                         "max_concurrency": self.lanes, "runtime_env": env}
        self._idle: queue.Queue[_Slot] = queue.Queue()  # one entry per free lane
        self._lock = threading.Lock()
        self._slots: list[_Slot] = []
        self._closed = False
        self.replaced = 0
        """Actors replaced (died, or saw a CUDA error)."""
        self.retried = 0
        """Stage calls run again because their actor died under them."""
        for actor in [self._launch() for _ in range(size)]:
            self._open(self._admit(actor, start_timeout_s))

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

    def _open(self, slot: _Slot | None) -> None:
        """Offer each of a newly admitted actor's lanes."""
        for _ in range(self.lanes if slot is not None else 0):
            self._idle.put(slot)

    @property
    def arch(self) -> str | None:
        with self._lock:
            return self._slots[0].info.arch if self._slots else None

    def workers(self) -> list[WorkerInfo]:
        """The live actors (started, not replaced)."""
        with self._lock:
            return [s.info for s in self._slots]

    def _take(self) -> _Slot:
        """A free lane of a live actor (a lane of one replaced meanwhile is dropped: its
        replacement brings lanes of its own)."""
        while True:
            slot = self._idle.get()
            with self._lock:
                if not slot.retired:
                    slot.running += 1
                    return slot

    def _give_back(self, slot: _Slot) -> None:
        """A call on `slot` ended: its lane is free again, or, when the actor was retired
        meanwhile and this was its last call, the actor is ended."""
        with self._lock:
            slot.running -= 1
            free, last = not slot.retired, slot.retired and slot.running == 0
        if free:
            self._idle.put(slot)
        elif last:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)

    def call(self, stage: Stage, *args: Any) -> Any:
        """Run `stage` on a free lane; again on another actor when the actor dies under it."""
        lost: Exception | None = None
        for attempt in range(self._retries + 1):
            slot = self._take()
            remote = slot.actor.baselines.remote if stage == "baselines" else \
                functools.partial(slot.actor.run.remote, stage)
            try:
                result = ray.get(remote(*args))
            except WORKER_LOST as e:
                lost = e
                log.warning("stage worker %s on %s lost during %s (%s); retrying on another",
                            slot.info.pid, slot.info.hostname, stage, type(e).__name__)
                self._replace(slot)
                self._give_back(slot)
                if attempt < self._retries:
                    with self._lock:
                        self.retried += 1
                continue
            except BaseException:  # an error of the stage code itself: its actor is fine
                self._give_back(slot)
                raise
            if self._replace_after_fault and isinstance(result, EvalResult) \
                    and result.status == Status.runtime_error and CUDA_FAULT.search(result.message):
                self._replace(slot)  # never reuse a worker whose device saw an error
            self._give_back(slot)
            return result
        raise EvaluationLost(f"{stage} lost its Ray worker on each of {self._retries + 1} tries;"
                             f" last: {lost}")

    def _replace(self, slot: _Slot) -> None:
        """Retire `slot`'s actor (once: its other lanes may report the same loss) and start a new
        one, which joins once it runs (wherever Ray places it; it waits for resources when the
        cluster has none free). A retired actor takes no more calls; it is ended once those in
        flight on it have ended (`_give_back`), so a fault in one lane's job does not cut the
        others' jobs short."""
        with self._lock:
            if slot.retired:
                return
            slot.retired = True
            if slot in self._slots:
                self._slots.remove(slot)
            self.replaced += 1

        def start() -> None:
            try:
                slot = self._admit(self._launch(), None)
            except BaseException:  # (Ray raises SystemExit here when it shuts down meanwhile)
                if not self._closed:  # logged; the pool goes on with the others
                    log.exception("a replacement stage worker did not start")
                return
            self._open(slot)

        threading.Thread(target=start, daemon=True, name="ray-stage-worker-start").start()

    def close(self) -> None:
        """Stop the actors (a replacement still starting is stopped once it runs)."""
        with self._lock:
            self._closed = True
            slots, self._slots = self._slots, []
        for slot in slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)
