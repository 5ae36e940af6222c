"""What one reference forward costs at minimum: FLOPs and bytes (for the roofline).

FLOPs come from torch's own `FlopCounterMode` (it counts matmuls, convolutions and attention; an
elementwise-only problem counts 0, which the parent reads as "memory-bound"). Minimum bytes are
inputs + outputs + parameters + buffers, each distinct storage once: what any kernel must at least
read or write once.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from feedback.worker.inputs import tensors


def count_flops(model: torch.nn.Module, args: Any) -> float | None:
    """FLOPs of `model(*args)`, or None when the counter cannot follow the program."""
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*args)
        return float(counter.get_total_flops())
    except Exception:
        return None


def min_bytes(model: torch.nn.Module, args: Any, output: Any) -> float:
    """Bytes of inputs, outputs, parameters and buffers, each storage counted once."""
    seen: dict[tuple[int, int], int] = {}
    for t in [*tensors(args), *tensors(output), *model.parameters(), *model.buffers()]:
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        seen[key] = max(seen.get(key, 0), t.numel() * t.element_size())
    return float(sum(seen.values()))
