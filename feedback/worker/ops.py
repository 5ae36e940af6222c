"""Which torch operators a candidate's forward actually dispatches (issue 4, class 8).

A candidate that calls `torch.matmul` or `F.conv2d` where the problem is about that operator has
written no kernel; reading its source misses calls made from C++ (`at::matmul`) or hidden behind
indirection. A `TorchDispatchMode` sees every operator that goes through the dispatcher, from
Python or from an extension's C++ alike, so one recorded call tells the parent what really ran;
its policy (strict, or glue ops such as `empty`/`view` allowed) decides. Kernels a candidate
launches itself are not operators and do not appear; library code called without the dispatcher
(cuBLAS straight from C++) shows up in the profile's kernel names instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class _Recorder(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ in a dynamo-disable that imports torch._dynamo
        # (2.6 s per job on two cores); this mode never runs under torch.compile.
        return False

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func._schema.name] += 1
        return func(*args, **(kwargs or {}))


def dispatched_ops(model: torch.nn.Module, args: Any) -> dict[str, int]:
    """Operator name (`aten::mm`) -> number of calls during one `model(*args)`."""
    recorder = _Recorder()
    with torch.no_grad(), recorder:
        model(*args)
    return dict(sorted(recorder.counts.items()))


def op_names(fn: Callable[[], Any]) -> set[str]:
    """Every operator `fn()` calls, composite ones included (`aten::linear` as well as the
    `aten::addmm` it becomes): torch's CPU profiler, which sees each operator at every level."""
    from torch.autograd.profiler import profile

    with profile(use_device=None) as prof:
        fn()
    return {e.name for e in prof.function_events if "::" in e.name}


def device_kernels(fn: Callable[[], Any]) -> list[str]:
    """Names of the device kernels `fn()` launched (CUDA): library kernels called without the
    dispatcher (cuBLAS, cuDNN from C++) show up here and nowhere else."""
    from torch.autograd.profiler import profile

    with profile(use_device="cuda") as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.function_events
                   if e.device_type != torch.autograd.DeviceType.CPU})


def base_kernel_name(kernel: str) -> str:
    """`void ns::my_kernel<4>(float*, int)` -> `my_kernel`; `my_kernel_0d1d` stays itself."""
    name = kernel.removeprefix("void ").split("(", 1)[0].split("<", 1)[0].strip()
    return name.rsplit("::", 1)[-1].split(" ")[-1]
