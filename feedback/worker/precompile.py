"""torch.compile's build of the reference, made before the `compiled` job asks for the device.

Why: the compile baseline's first call builds the reference with inductor, CPU work of 2.5 s
(median, 41 problems on the H200, runs 43-44; up to 5.5 s) during which the job held the device
(shared) and nothing ran on it: the device was the throughput bench's bottleneck (issue 13).

How: the reference is made on the meta device and given uninitialised memory on its device
(`to_empty`), its inputs are uninitialised buffers of the shapes, strides and dtypes that
`get_inputs()` draws: no kernel runs, no value is read. A backend compiles the graph that
TorchDynamo captures with inductor, whose caches (AOTAutograd's and the FX graph cache, both in
TORCHINDUCTOR_CACHE_DIR) keep the build, then stops before the compiled graph would run. The
job's own `torch.compile` later traces again under the device hold and finds its build there.

Why a build from uninitialised memory is safe to find: inductor keys a build by the graph, its
inputs' shapes, strides, dtypes and devices, the settings that change its code (the matmul
precision and CPU threads are set here as the job will set them), and the values of any tensor
constant in the graph. Parameters and buffers are the graph's inputs, so their values are not in
the key, nor in the code; a constant made from uninitialised memory (or a meta tensor) gives
another key, and the timed compile then builds its own.

Only a build: when anything goes wrong here (a model that cannot be made on the meta device, a
graph that reads values, a graph break anywhere: `fullgraph`, so that no part of the forward runs
eagerly on the uninitialised memory), the caches are as before and the timed compile builds as
it did. Modes other than "default" are not built here: `max-autotune`
benchmarks kernels on the device while it compiles, and another mode's build would be another
cache entry.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from feedback.worker import devices
from feedback.worker.loading import load_problem


class _Built(Exception):
    """Raised by the backend once inductor's build is cached: the graph is not run."""


def build(job, device: torch.device, cpu_threads: int | None = None) -> bool:
    """Build the reference's torch.compile for `job` (role `compiled`) into inductor's caches;
    False when nothing was built (the reason does not matter: the timed compile builds then).
    `cpu_threads` as the job's harness will set them: they are part of the cache key, like the
    matmul precision."""
    if job.options.compile_mode not in (None, "default"):
        return False
    devices.set_precision()
    devices.start_thread_pools(cpu_threads)
    import torch._dynamo
    from torch._inductor.compile_fx import compile_fx

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]):
        compile_fx(gm, example_inputs)
        raise _Built

    try:
        module = load_problem(job.problem, job.options.size)
        with torch.device("meta"):
            model = module.Model(*module.get_init_inputs())
            args = list(module.get_inputs())
        model = model.to_empty(device=device).eval()
        args = [torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=device)
                if isinstance(a, torch.Tensor) else a for a in args]
        with torch.no_grad():  # fullgraph: a graph break raises here instead of running code
            torch.compile(model, backend=backend, fullgraph=True)(*args)
    except Exception as exc:  # noqa: BLE001 - only a build ahead: the timed compile decides
        return _built(exc)
    finally:
        with contextlib.suppress(Exception):
            torch._dynamo.reset()  # the timed compile traces afresh and finds the build cached
    return False  # the graph ran without reaching the backend: nothing was compiled


def _built(exc: BaseException) -> bool:
    """Whether `exc` is the backend's stop (TorchDynamo wraps it) rather than a failure."""
    while exc is not None:
        if isinstance(exc, _Built):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
