"""Describe a problem's inputs (dtype and shape) without allocating them.

`get_inputs()` of a GPU-sized problem may create gigabytes; run under `torch.device("meta")`
it creates shapes only, so listing 250 problems costs milliseconds and no memory.
"""

from __future__ import annotations

from typing import Any

import torch

from problems.module import load_module
from problems.record import Problem

_DTYPE_SHORT = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.bool: "bool"}


def describe_inputs(problem: Problem, size: str | None = None) -> list[str]:
    """One string per input, e.g. `f32[4096, 4096]`; non-tensor inputs as their repr.

    Raises:
        ProblemLoadError: the module does not load.
        Exception: whatever `get_inputs()` raises on the meta device (callers show it as unknown).
    """
    return [describe_value(x) for x in meta_inputs(problem, size)]


def meta_inputs(problem: Problem, size: str | None = None) -> list[Any]:
    """`get_inputs()` run on the meta device: tensors with shapes and dtypes, no storage.

    Raises as `describe_inputs` does.
    """
    module = load_module(problem, size)
    with torch.device("meta"):
        return list(module.get_inputs())


def input_record(value: Any) -> dict[str, Any]:
    """`{"dtype": "f32", "shape": [2, 3]}` for a tensor, `{"value": repr}` for anything else."""
    if isinstance(value, torch.Tensor):
        return {"dtype": describe_value(value).split("[")[0], "shape": list(value.shape)}
    return {"value": describe_value(value)}


def describe_value(value: Any) -> str:
    """`f32[2, 3]` for a tensor, a bounded repr for anything else."""
    if isinstance(value, torch.Tensor):
        dtype = _DTYPE_SHORT.get(value.dtype, str(value.dtype).removeprefix("torch."))
        return f"{dtype}[{', '.join(map(str, value.shape))}]"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
