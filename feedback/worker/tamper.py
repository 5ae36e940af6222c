"""Detect a candidate that tampers with the harness or with `torch` itself.

Why detection and not prevention: candidate and trusted code share one interpreter, so nothing in
it is out of the candidate's reach (issue 4, class 12). What the candidate cannot do is tamper
without leaving a trace: before its import we take a `Snapshot` of every object the comparison,
timing and reference code depend on, and after its import and after each of its calls we compare.
Any difference is a guard violation that names what changed.

What is watched (identity, `is`, never equality, except plain constants):
- `builtins`, `time`, `math`, `os`, `secrets`, `json`, `torch`, `torch.nn`, `torch.nn.functional`,
  `torch.cuda`, `torch.linalg`, `torch.special`, `torch.fft`, `torch._C._nn`,
  `torch._C._VariableFunctions`, `torch._C`, `torch.cuda.Event`, the `torch.Tensor` / `TensorBase` / `nn.Module` classes and every
  `nn.Module` subclass in `torch.nn` (callables only: lazy additions are fine, replacements are not);
- the problem's module globals (its sizes, `get_inputs`, `Model`) and the classes of every module
  inside the reference model, with the code objects of their functions;
- the worker's own modules and their functions' code objects;
- precision flags (TF32, reduced-precision reductions), default dtype, and the stacks of
  `TorchFunctionMode` / `TorchDispatchMode` (a mode could rewrite what the reference computes);
  cuDNN/oneDNN switches and torch's thread counts (more threads for the candidate's process is an
  unfair clock on cpp); the number of global `nn.Module` hooks (a global forward hook sees, and can
  rewrite, the reference's output);
- `statistics`, `random`, `threading`, `secrets`, the profiler and dispatch-mode modules, the
  records of `feedback.job` / `feedback.result` and pydantic's `BaseModel`, and the classes defined
  in every watched harness module (patching `ThreadCount.check` leaves the module table intact);
- the dispatcher (`DispatchTable`): the kernels registered for every operator trusted code calls
  (the reference and its float64 twin at every level, drawing inputs, the comparison). An
  extension that registers its own kernel for `aten::relu` or `aten::abs` (TORCH_LIBRARY_IMPL at
  load, or `torch.library`) changes what the reference computes or how it is compared.
"""

from __future__ import annotations

import builtins
import importlib
import json
import math
import os
import secrets
import sys
import time
import types
from collections.abc import Iterable
from typing import Any

import torch

_MODULES = ("torch.nn.functional", "torch.cuda", "torch.linalg", "torch.special", "torch.fft")
_CONSTANTS = (int, float, str, bytes, bool, tuple, frozenset, type(None))


def precision_flags() -> dict[str, Any]:
    """The knobs that silently change fp32 math (TF32, reduced-precision reductions)."""
    probes = {
        "matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision,
        "matmul.fp16_reduced": lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "matmul.bf16_reduced": lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "default_dtype": torch.get_default_dtype,
        "function_modes": torch._C._len_torch_function_stack,
        "dispatch_modes": torch._C._len_torch_dispatch_stack,
        "cudnn.enabled": lambda: torch.backends.cudnn.enabled,
        "cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
        "cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
        "mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
        "num_threads": torch.get_num_threads,
        "num_interop_threads": torch.get_num_interop_threads,
        "global module hooks": _global_hook_counts,
    }
    flags = {}
    for name, probe in probes.items():
        try:
            flags[name] = probe()
        except Exception:  # a knob this torch build lacks
            flags[name] = None
    return flags


def _global_hook_counts() -> tuple[int, ...]:
    """How many global nn.Module hooks of each kind are registered."""
    from torch.nn.modules import module

    return tuple(len(v) for k, v in sorted(vars(module).items())
                 if k.startswith("_global") and isinstance(v, dict))


_EXTRA_MODULES = ("statistics", "random", "threading", "_thread", "torch.profiler",
                  "torch.autograd.profiler", "torch.utils._python_dispatch", "torch.random",
                  "feedback.job", "feedback.result", "feedback.policy")


def _namespaces() -> list[tuple[str, Any]]:
    """(label, object) pairs whose attribute tables are watched."""
    spaces: list[tuple[str, Any]] = [
        ("builtins", builtins), ("time", time), ("math", math), ("os", os), ("secrets", secrets),
        ("json", json), ("torch", torch), ("torch.nn", torch.nn), ("torch.Tensor", torch.Tensor),
        ("torch._C.TensorBase", torch._C.TensorBase), ("torch.nn.Module", torch.nn.Module),
        ("torch._C._nn", torch._C._nn), ("torch._C._VariableFunctions", torch._C._VariableFunctions),
        ("torch._C", torch._C), ("torch.cuda.Event", torch.cuda.Event),
    ]
    spaces += [(name, importlib.import_module(name)) for name in _MODULES]
    for name, value in vars(torch.nn).items():
        if isinstance(value, type) and issubclass(value, torch.nn.Module) and value is not torch.nn.Module:
            spaces.append((f"torch.nn.{name}", value))
    spaces += [(name, sys.modules[name]) for name in _EXTRA_MODULES if sys.modules.get(name)]
    import pydantic

    spaces.append(("pydantic.BaseModel", pydantic.BaseModel))
    harness = [(name, module) for name, module in list(sys.modules.items())
               if (name.startswith("feedback.worker") or name in _EXTRA_MODULES[-3:])
               and module is not None]
    spaces += harness
    for name, module in harness:  # classes defined there: their methods are harness code too
        spaces += [(f"{name}.{k}", v) for k, v in vars(module).items()
                   if isinstance(v, type) and getattr(v, "__module__", None) == name]
    return spaces


def _table(obj: Any) -> dict[str, Any]:
    try:
        return dict(vars(obj))
    except TypeError:  # an instance without __dict__ (torch._C._VariableFunctions): its class's
        return dict(vars(type(obj)))


def _code_of(value: Any) -> Any:
    """What makes a function behave as it does: its code, defaults and closure cells' identity."""
    func = getattr(value, "__func__", value)
    if isinstance(func, types.FunctionType):
        return (func.__code__, func.__defaults__, func.__kwdefaults__)
    return None


class Snapshot:
    """The watched state at one moment; `changes()` lists what differs now."""

    def __init__(self, extra: Iterable[tuple[str, Any]] = ()):
        self._spaces = _namespaces() + list(extra)
        self._tables = [(label, obj, self._watched(obj, full=label.startswith("problem")))
                        for label, obj in self._spaces]
        self._flags = precision_flags()

    @staticmethod
    def _watched(obj: Any, full: bool) -> dict[str, tuple[Any, Any]]:
        watched = {}
        for name, value in _table(obj).items():
            if full or callable(value) or isinstance(value, (types.ModuleType, property)):
                watched[name] = (value, _code_of(value))
        return watched

    def changes(self) -> list[str]:
        """Human-readable differences: `torch.nn.functional.gelu replaced`, flags changed..."""
        found = []
        for label, obj, watched in self._tables:
            table = _table(obj)
            for name, (value, code) in watched.items():
                now = table.get(name, _MISSING)
                if now is _MISSING:
                    found.append(f"{label}.{name} deleted")
                elif now is not value:
                    if not (isinstance(value, _CONSTANTS) and _same(now, value)) and not _torch_wrapper(now, value):
                        found.append(f"{label}.{name} replaced")
                elif code is not None and _code_of(now) != code:
                    found.append(f"{label}.{name} code patched")
        flags = precision_flags()
        for name, value in self._flags.items():
            if flags[name] != value:
                found.append(f"{name} changed from {value!r} to {flags[name]!r}")
        return found


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


_MISSING = object()
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _torch_wrapper(now: Any, old: Any) -> bool:
    """torch's own lazy patches: e.g. importing torch._dynamo (the profiler does) replaces
    `torch.manual_seed` by a wrapper whose `__wrapped__` is the original and whose code lives in
    torch. A candidate's wrapper has code from the candidate's file."""
    code = getattr(getattr(now, "__func__", now), "__code__", None)
    return (getattr(now, "__wrapped__", None) is old and code is not None
            and code.co_filename.startswith(_TORCH_DIR))


def model_namespaces(model: torch.nn.Module, label: str) -> list[tuple[str, Any]]:
    """The classes of every submodule of `model` (their `forward` must stay what it was)."""
    seen: dict[type, None] = {}
    for module in model.modules():
        for cls in type(module).__mro__:
            if cls.__module__.startswith("torch.nn") or cls in (torch.nn.Module, object):
                continue  # torch.nn classes are watched already
            seen.setdefault(cls)
    return [(f"{label}.{cls.__qualname__}", cls) for cls in seen]


def instance_hooks(model: torch.nn.Module) -> dict[str, int]:
    """Forward (pre-)hooks per submodule that has any (weight_norm's are the problem's own)."""
    counts = {name or "<root>": len(m._forward_hooks) + len(m._forward_pre_hooks)
              for name, m in model.named_modules()}
    return {k: v for k, v in counts.items() if v}


def instance_overrides(model: torch.nn.Module) -> list[str]:
    """Submodules whose `forward` was replaced on the instance (`m.forward = fake`)."""
    return [name or "<root>" for name, module in model.named_modules() if "forward" in vars(module)]


class DispatchTable:
    """The dispatcher's kernel table for aten operators, to tell whether a candidate replaced one."""

    def __init__(self, ops: Iterable[str] | None = None) -> None:
        names = list(ops) if ops is not None else [
            n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")]
        self._dumps = {n: _dump(n) for n in names}

    def changes(self) -> list[str]:
        """`kernel of aten::relu registered anew (CPU)` for every changed registration."""
        found = []
        for name in self._dumps:
            before, now = self._dumps[name], _dump(name)
            if now != before:
                keys = sorted(set(now.splitlines()) ^ set(before.splitlines()))
                shown = sorted({k.split(":", 1)[0] for k in keys})[:4]
                found.append(f"kernel of {name} registered anew ({', '.join(shown)}): the operator "
                             "the reference calls was replaced")
        return found


def _dump(name: str) -> str:
    try:
        return torch._C._dispatch_dump(name)
    except Exception:
        return ""
