"""Run-time guards against reward hacking (issue 4): each names the trick it caught.

- `check_output`: exact `torch.Tensor` type (subclasses can defer or fake their values), no
  stride-0 / expanded dimensions, no storage shared with any input or with an output the caller
  still holds from an earlier call (aliasing and buffer reuse).
- `check_inputs_untouched`: the candidate's input clones still equal pristine copies, bit for bit.
- `ThreadCount`: Python threads, OS threads (`/proc/self/task`) and child processes before/after;
  work left on a background thread or in a forked process escapes timing and can change outputs
  later (the sandbox kills the process tree at the end either way).
- `poison_memory`: allocate, fill with 0xFF bytes (NaN for floats, -1 for integers) and free, so
  a candidate output built on `empty` without a full write reads poison, not stale answers.
- `check_stable` (`settling` around other work): the output read again after a pause must not
  have changed (deferred writes).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import torch

from feedback.result import Status
from feedback.worker.cputime import task_ids
from feedback.worker.errors import JobFailure
from feedback.worker.inputs import tensors

POISON_MIN_BYTES = {"cpu": 1 << 20, "cuda": 64 << 20}
POISON_MAX_BYTES = {"cpu": 256 << 20, "cuda": 2 << 30}
SMALL_BLOCK = 1 << 20  # the CUDA caching allocator's small-pool boundary
SETTLE_S = 0.02
CPU_COPIES = 6
REUSED = ("reuses the memory of an output returned by an earlier call, which the caller still "
          "holds (cached or replayed result)")


def violation(trick: str) -> JobFailure:
    return JobFailure(Status.guard_violation, trick)


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    """[start, end) bytes of a tensor's whole storage, or None for an empty one."""
    storage = t.untyped_storage()
    if storage.nbytes() == 0:
        return None
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _overlaps(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1]


def check_output(output: Any, inputs: Any, held: Any = ()) -> None:
    """Type, stride and aliasing checks on everything the candidate returned."""
    leaves = [output] if isinstance(output, torch.Tensor) else (
        list(output) if isinstance(output, (tuple, list)) else [output])
    input_spans = [(i, _span(t)) for i, t in enumerate(tensors(inputs))]
    held_spans = [_span(t) for t in tensors(held)]
    seen: list[tuple[int, int] | None] = []
    for k, leaf in enumerate(leaves):
        name = "output" if len(leaves) == 1 else f"output[{k}]"
        if isinstance(leaf, torch.Tensor) and type(leaf) is not torch.Tensor:
            raise violation(f"{name} is a {type(leaf).__module__}.{type(leaf).__qualname__}, a "
                            "torch.Tensor subclass; outputs must be plain torch.Tensor (subclasses can "
                            "defer or fake their values)")
        if not isinstance(leaf, torch.Tensor):
            continue
        if any(stride == 0 and size > 1 for stride, size in zip(leaf.stride(), leaf.shape)):
            raise violation(f"{name} has a stride-0 (expanded/broadcast) dimension: strides "
                            f"{list(leaf.stride())} for shape {list(leaf.shape)}; write every element")
        span = _span(leaf)
        for i, other in input_spans:
            if _overlaps(span, other):
                raise violation(f"{name} shares memory with input {i} (returns or views an input "
                                "instead of writing a new tensor)")
        if any(_overlaps(span, other) for other in held_spans):
            raise violation(f"{name} {REUSED}")
        if any(_overlaps(span, other) for other in seen):
            raise violation(f"{name} shares memory with another output")
        seen.append(span)


def check_apart(outputs: Sequence[Any]) -> None:
    """No two of `outputs` (each one call's whole output, all still held by the caller) share
    memory: one sort of their storage spans, not every pair (a sample of the time job holds
    hundreds). Within one output, `check_output` has already judged its leaves."""
    spans = sorted((span, i) for i, out in enumerate(outputs) for t in tensors(out)
                   if (span := _span(t)) is not None)
    end, owner = -1, None
    for (lo, hi), i in spans:
        if lo < end and i != owner:
            raise violation(f"an output {REUSED}")
        if hi > end:
            end, owner = hi, i


def check_inputs_untouched(used: Any, pristine: Any) -> None:
    """The candidate's inputs must be bit-identical to copies taken before the call."""
    for i, (a, b) in enumerate(zip(tensors(used), tensors(pristine))):
        if a.shape != b.shape or a.dtype != b.dtype or not _bitwise_equal(a, b):
            raise violation(f"input {i} was modified in place by the candidate; inputs are read-only")


_SAME_WIDTH = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, for two tensors of one dtype and shape: floating-point ones are read as
    integers of their width, so a NaN equals only the same NaN and -0.0 differs from 0.0 (a
    write into an input that keeps its value still changes its bits only there). One
    comparison over the data: `==` with an `isnan` pair took five, a share of every probe's and
    spot check's hold of the device (docs/benchmarks.md, run 97)."""
    if a.is_complex():
        a, b = torch.view_as_real(a.resolve_conj()), torch.view_as_real(b.resolve_conj())
    if a.is_floating_point():
        width = _SAME_WIDTH[a.element_size()]
        a, b = a.view(width), b.view(width)
    return bool(torch.equal(a, b))


def os_threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def child_processes() -> list[int]:
    """Processes whose parent is this one (forked by native code, or left by a library): the
    kernel's list of each thread's children, else a scan of every process's parent in /proc
    (on a busy 16-core host ~10 ms, a dozen times per job)."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # no CONFIG_PROC_CHILDREN
        return _scan_children()
    try:
        tasks = os.listdir("/proc/self/task")
        found: set[int] = set()
        for tid in tasks:
            # a thread that ended meanwhile has no file any more
            with contextlib.suppress(FileNotFoundError), open(f"/proc/self/task/{tid}/children") as f:
                found.update(int(pid) for pid in f.read().split())
        return sorted(found)
    except OSError:
        return _scan_children()


def _scan_children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    stat = f.read()
                if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


class ThreadCount:
    """Threads and child processes now; `check()` raises if more exist later (after a short
    settle for exiting threads)."""

    def __init__(self) -> None:
        self.python = threading.active_count()
        self.os = os_threads()
        self.tids = task_ids()  # the threads that are not the candidate's (cputime.py)
        self.children = len(child_processes())

    def check(self, when: str, processes: bool = True) -> None:
        """`processes=False` skips the /proc scan (a few ms), for checks after every timed call."""
        if processes:
            started = len(child_processes()) - self.children
            if started > 0:
                raise violation(f"started {started} child process(es) {when}: work must happen in "
                                "this process, inside forward()")
        python, native = threading.active_count(), os_threads()
        if python <= self.python and native <= self.os:
            return
        time.sleep(SETTLE_S)  # a joined thread may still be leaving
        python, native = threading.active_count(), os_threads()
        if python > self.python:
            names = [t.name for t in threading.enumerate()][self.python:]
            raise violation(f"background thread: {python - self.python} Python thread(s) still "
                            f"running {when} ({', '.join(names)}); work must finish inside forward()")
        if native > self.os:
            raise violation(f"background thread: {native - self.os} OS thread(s) still running "
                            f"{when}; work must finish inside forward()")


def poison_memory(device: torch.device, sizes: list[int], budget: int) -> None:
    """Fill freed allocator memory with 0xFF bytes, then free it again.

    Blocks of each expected output size come first (the caching allocator hands the same blocks
    to the candidate's next allocation of that size), then one large block sized to `budget`
    and a spread of small ones (the small pool holds allocations under 1 MB).
    """
    kind = "cuda" if device.type == "cuda" else "cpu"
    budget = min(max(budget, POISON_MIN_BYTES[kind]), POISON_MAX_BYTES[kind])
    if kind == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        budget = min(budget, free // 4)
    # On the CPU (glibc), small allocations between the poison pass and the candidate's can split
    # a freed block; several poisoned blocks per output size leave the next one of that size
    # poisoned all the same.
    copies = 1 if kind == "cuda" else CPU_COPIES
    blocks = [torch.empty(n, dtype=torch.uint8, device=device)
              for n in sizes if 0 < n <= budget for _ in range(max(1, min(copies, budget // n)))]
    blocks.append(torch.empty(budget, dtype=torch.uint8, device=device))
    if kind == "cuda":
        blocks += [torch.empty(SMALL_BLOCK // 2 >> (k % 6), dtype=torch.uint8, device=device)
                   for k in range(24)]
    for block in blocks:
        block.fill_(0xFF)
    if kind == "cuda":
        torch.cuda.synchronize(device)
    while blocks:  # the first-allocated (best-fit) block is freed last: first in line again
        blocks.pop()


def check_stable(output: Any, device: torch.device) -> None:
    """Re-read the outputs after a pause: values written later (deferred work) are a violation."""
    with settling(output, device):
        pass


@contextlib.contextmanager
def settling(output: Any, device: torch.device) -> Any:
    """`check_stable` around a block of trusted work: the outputs are copied on entry and read
    again on exit, at least `SETTLE_S` later (the block's own time counts towards the pause, the
    rest is slept). A probe in the time job (probes.py) runs the reference inside it, which on
    a large output takes longer than the pause: the device, held alone there, no longer waits
    out 20 ms per probe. On exit the check runs even when the block raised, and its violation
    takes precedence, as when the pause came first. The copies live through the block: one
    output's size more memory at its peak."""
    leaves = [t for t in tensors(output) if type(t) is torch.Tensor]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    before = [t.clone() for t in leaves]
    start = time.perf_counter()
    try:
        yield
    finally:
        left = SETTLE_S - (time.perf_counter() - start)
        if left > 0:
            time.sleep(left)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        for k, (a, b) in enumerate(zip(leaves, before)):
            if not _bitwise_equal(a, b):
                raise violation(f"output {k} changed after forward() returned (deferred or "
                                "background work); the result must be complete when forward() "
                                "returns")
