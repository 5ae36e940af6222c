"""The correctness/timing side of the Ray executor: `StageWorker` actors and the `ActorPool`
that keeps a fixed number of them, retries a call whose actor died on another one, and replaces
dead or faulted actors (see `feedback.ray_executor` for the whole executor).
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
from typing import Any, Literal

import ray
from pydantic import BaseModel, ConfigDict, Field
from ray.exceptions import ObjectLostError, RayActorError, WorkerCrashedError

from feedback.environment import cuda_arch, host_environment
from feedback.evaluate import LocalEvaluator
from feedback.executor import ExecutorError
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
            except BaseException:  # an error of the stage code itself: its actor is fine
                self._idle.put(slot)
                raise
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
