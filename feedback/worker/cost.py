"""What one reference forward costs at minimum: FLOPs and bytes (for the roofline).

FLOPs come from torch's own `FlopCounterMode` (it counts matmuls, convolutions and attention; an
elementwise-only problem counts 0, which the parent reads as "memory-bound"). Minimum bytes are
inputs + outputs + parameters + buffers, each distinct storage once: what any kernel must at least
read or write once.

torch wraps the counter's dispatch in a dynamo-disable whose first call imports `torch._dynamo`:
2 s on the 2-core machine, 4.5 s per eager time job on the H200 (its `cost` phase, inside the
job's hold of the device alone). The counter never runs under torch.compile, so the wrapper is
told, through the cache it keeps on the wrapped function, that the function is its own disabled
form (feedback/worker/ops.py skips the same wrapper for its mode). Where torch's internals differ
from that, the counter works as it always did, import included.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import flop_counter

from feedback.worker.inputs import tensors


def _without_dynamo_import() -> None:
    """Point the dynamo-disable around the counter's dispatch at the function itself."""
    inner = getattr(flop_counter, "_FlopCounterMode", None)
    raw = getattr(getattr(inner, "__torch_dispatch__", None), "__wrapped__", None)
    if raw is not None and getattr(raw, "__dynamo_disable", None) is None:
        setattr(raw, "__dynamo_disable", raw)  # the name torch/_compile.py caches it under


def count_flops(model: torch.nn.Module, args: Any) -> float | None:
    """FLOPs of `model(*args)`, or None when the counter cannot follow the program."""
    _without_dynamo_import()
    try:
        with torch.no_grad(), flop_counter.FlopCounterMode(display=False) as counter:
            model(*args)
        return float(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - no count, the roofline says so
        return None


def min_bytes(model: torch.nn.Module, args: Any, output: Any) -> float:
    """Bytes of inputs, outputs, parameters and buffers, each storage counted once."""
    seen: dict[tuple[int, int], int] = {}
    for t in [*tensors(args), *tensors(output), *model.parameters(), *model.buffers()]:
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        seen[key] = max(seen.get(key, 0), t.numel() * t.element_size())
    return float(sum(seen.values()))
