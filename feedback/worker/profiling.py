"""The `profile` job: where the time of a few calls goes (P feedback), and how much is the candidate's.

Rows: torch.profiler over `CALLS` calls after a warm-up; on CUDA the device-side events (kernels,
memcpy, memset) by self device time; on cpp the CPU operators by self CPU time, plus one row for
the time spent in `forward` outside any operator (Python glue, and candidate code we could not
attribute).

Which rows are the candidate's own (`ProfileRow.own`), the heuristic:
- CUDA/Triton: a kernel is own when its base name (the identifier before `(`/`<`, after the last
  `::`) occurs as an identifier in the candidate's source AND the reference program does not launch
  a kernel of that exact name. Library kernels (aten, cuBLAS, cuDNN, CUTLASS) are named in no
  candidate's source; a Triton kernel's name is its `@triton.jit` function's; a CUDA kernel's is
  its `__global__` function's. Kernels named through macros are missed (counted as not own).
- cpp: the functions of the candidate's compiled extensions (extension modules loaded from the
  extensions directory, found in the candidate's globals, classes and instances) are wrapped in `record_function("own:<module>.<function>")` for this job
  only, so their self CPU time is a row of its own; custom operators registered under a namespace
  that occurs in the candidate's source (`myns::op`, not aten/prim) are own too. A candidate that
  kept a direct reference to an extension function before the wrapping is not attributed.
`own_share` = own self time / all self time in the breakdown (not only the top rows).
"""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from feedback.job import WorkerJob
from feedback.result import Profile, ProfileRow
from feedback.worker import devices, inputs
from feedback.worker.errors import candidate_error
from feedback.worker.harness import Harness, check_integrity, prepare, threads_for
from feedback.worker.ops import base_kernel_name

CALLS = 5
TOP_ROWS = 20
FORWARD = "forward (Python glue and code outside operators)"
OWN_PREFIX = "own:"
LIBRARY_NAMESPACES = {"aten", "prim", "prims", "c10d", "_c10d", "profiler", "cuda", "inductor",
                      "quantized", "torchvision", "triton", "mkldnn", "onednn", "_inductor_test"}


def run_profile(job: WorkerJob) -> Profile:
    candidate = job.role == "candidate"
    h = prepare(job if candidate else job.model_copy(update={"candidate_path": None}),
                cpu_threads=threads_for(job))
    args = inputs.make_inputs(h.problem, h.device)
    device_rows = h.device.type == "cuda"
    if not candidate:
        return breakdown(_events(h, h.reference, args), device_rows, own=lambda name: False, mark=False)
    source = Path(job.candidate_path).read_text(errors="replace")
    identifiers = set(re.findall(r"[A-Za-z_]\w*", source))
    wrapped = _wrap_extensions(job.extensions_dir, _namespaces(h))
    try:
        events = _events(h, h.candidate, args)
    finally:
        for module, name, original in wrapped:
            setattr(module, name, original)
    h.threads = None  # the profiler keeps a thread of its own; the correct job judges threads
    check_integrity(h, "after the profiled calls")
    reference_kernels = {e.key for e in _events(h, h.reference, args)} if device_rows else set()

    def own(name: str) -> bool:
        if name.startswith(OWN_PREFIX):
            return True
        if device_rows:
            return name not in reference_kernels and base_kernel_name(name) in identifiers
        namespace = name.split("::", 1)[0] if "::" in name else None
        return namespace is not None and namespace not in LIBRARY_NAMESPACES and namespace in identifiers
    return breakdown(events, device_rows, own, mark=True)


def _events(h: Harness, model: torch.nn.Module, args: Any) -> list[Any]:
    """key_averages() of CALLS profiled calls after two warm-up calls."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if h.device.type == "cuda" else [])
    try:
        with torch.no_grad():
            for _ in range(2):
                model(*args)
            devices.synchronize(h.device)
            with profile(activities=activities) as prof:
                for _ in range(CALLS):
                    with record_function(FORWARD):
                        model(*args)
                devices.synchronize(h.device)
    except BaseException as exc:
        raise candidate_error(exc, "forward raised while profiling") from exc
    return list(prof.key_averages())


def breakdown(events: list[Any], device_rows: bool, own, mark: bool) -> Profile:
    """Rows by self time (device time for CUDA, CPU time otherwise), largest first."""
    picked = []
    for e in events:
        is_device = e.device_type != torch.autograd.DeviceType.CPU
        if device_rows != is_device:
            continue
        self_us = float(e.self_device_time_total if device_rows else e.self_cpu_time_total)
        if self_us > 0 and not e.key.startswith("ProfilerStep") and e.key != "[memory]":
            picked.append((e.key, self_us, int(e.count)))
    total = sum(us for _, us, _ in picked)
    picked.sort(key=lambda row: -row[1])
    rows = [ProfileRow(name=name, self_time_us=us, count=count, share=us / total if total else 0.0,
                       own=mark and own(name)) for name, us, count in picked]
    own_us = sum(r.self_time_us for r in rows if r.own)
    return Profile(rows=rows[:TOP_ROWS], own_share=(own_us / total if total else 0.0) if mark else None,
                   device="cuda" if device_rows else "cpu")


def _namespaces(h: Harness) -> list[dict[str, Any]]:
    """Where a candidate keeps its extension modules: its module globals, its classes, instances.

    (torch's loader does not register extensions in `sys.modules`, so they are found by reference.)
    """
    spaces = [vars(h.candidate_module)] if h.candidate_module is not None else []
    for module in h.candidate.modules():
        spaces += [vars(module)] + [vars(cls) for cls in type(module).__mro__]
    return spaces + [dict(sys.modules)]


def _wrap_extensions(extensions_dir: str, spaces: list[dict[str, Any]]) -> list[tuple[Any, str, Any]]:
    """Wrap every function of the extension modules loaded from `extensions_dir` (see docstring)."""
    root = os.path.realpath(extensions_dir)
    found: dict[int, Any] = {}
    for space in spaces:
        for value in list(space.values()):
            path = getattr(value, "__file__", None) if isinstance(value, types.ModuleType) else None
            if path and path.endswith(".so") and os.path.realpath(path).startswith(root + os.sep):
                found[id(value)] = value
    wrapped = []
    for module in found.values():
        for name, value in list(vars(module).items()):
            if callable(value) and not isinstance(value, type) and not name.startswith("_"):
                wrapped.append((module, name, value))
                setattr(module, name, _recorded(f"{OWN_PREFIX}{module.__name__}.{name}", value))
    return wrapped


def _recorded(label: str, fn: Any) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        with record_function(label):
            return fn(*args, **kwargs)
    return call
