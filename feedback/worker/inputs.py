"""Inputs made by trusted code: secret seeds, the right device, clones, stress rescalings.

Why OS-entropy seeds: a candidate specialised to a fixed seed (or to `torch.manual_seed(42)`
content) must meet inputs nobody could predict (issue 4, class 11). Why `get_inputs()` runs under
the target device: tensors are then drawn there directly (fast enough to draw fresh content for
every timed call), with the same distributions the problem wrote down.
"""

from __future__ import annotations

import random
import secrets
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

STRESS_TRANSFORMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "x*1e-2": lambda x: x * 1e-2,
    "x*16": lambda x: x * 16,
    "x+5": lambda x: x + 5,
}
"""Rescalings of the floating-point inputs for the numeric stress pass (issue 4, class 14)."""


def secret_seed() -> int:
    """A seed from OS entropy; never a constant."""
    return secrets.randbits(63)


def seed_everything(seed: int) -> None:
    """Seed torch (CPU and CUDA), `random` and numpy: whichever the problem's `get_inputs` uses.

    The generators one by one, not `torch.manual_seed`: where CUDA is not initialised (the cpp
    backend) that queues a lazy CUDA seeding with a captured stack trace, 130 us of the 280 us
    that drawing a small input set took on the CPU machine, once per timed call."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (1 << 32))


def make_inputs(module: types.ModuleType, device: torch.device, seed: int | None = None) -> list[Any]:
    """Call the problem's `get_inputs()` under a secret seed and move its tensors to `device`.

    Drawing on the device is tried first; a `get_inputs` that cannot run there (numpy, explicit
    CPU-only calls) is drawn on the CPU and moved. That choice is made once per problem module:
    the CPU's generator and the GPU's draw different values from one seed, so a draw that moved
    from one to the other between a trial and its pristine redraw would make the candidate's
    untouched input look modified. Running short of device memory (other jobs share the device)
    is not a reason to draw on the CPU: it propagates, as a failure the evaluator retries alone.
    """
    seed = secret_seed() if seed is None else seed
    seed_everything(seed)
    if device.type != "cpu" and not _ON_CPU.get(module, False):
        try:
            with torch.device(device):
                values = to_device(list(module.get_inputs()), device)
        except torch.OutOfMemoryError:
            raise
        except Exception:
            if module in _ON_CPU:  # drawn on the device before: the same draw must not move
                raise
            _ON_CPU[module] = True
            seed_everything(seed)
        else:
            _ON_CPU.setdefault(module, False)
            return values
    return to_device(list(module.get_inputs()), device)


_ON_CPU: weakref.WeakKeyDictionary[types.ModuleType, bool] = weakref.WeakKeyDictionary()
"""Per problem module: whether its inputs are drawn on the CPU and moved (`make_inputs`)."""


def to_device(values: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) list/tuple/dict to `device`."""
    return tree_map(lambda t: t.to(device), values)


def tree_map(fn: Callable[[torch.Tensor], Any], values: Any) -> Any:
    """Apply `fn` to every tensor in nested lists/tuples/dicts; other leaves are kept."""
    if isinstance(values, torch.Tensor):
        return fn(values)
    if isinstance(values, (list, tuple)):
        mapped = [tree_map(fn, v) for v in values]
        return mapped if isinstance(values, list) else tuple(mapped)
    if isinstance(values, dict):
        return {k: tree_map(fn, v) for k, v in values.items()}
    return values


def tensors(values: Any) -> list[torch.Tensor]:
    """Every tensor in a nested structure, in order."""
    found: list[torch.Tensor] = []
    tree_map(found.append, values)
    return found


def clone(values: Any) -> Any:
    """Deep copies of every tensor (fresh storage; other leaves shared, they are immutable)."""
    return tree_map(lambda t: t.clone(), values)


def to_double(values: Any) -> Any:
    """float64 copies of floating-point tensors (integer/bool tensors kept) for the fp64 reference."""
    return tree_map(lambda t: t.double() if t.is_floating_point() else t.clone(), values)


def head(values: Any, n: int) -> Any:
    """The first `n` elements of every tensor, flattened (other leaves kept): the same operators
    on a bounded piece, for a trial that only records which operators run (harness.py)."""
    return tree_map(lambda t: t.reshape(-1)[:n], values)


def stress(values: Any, name: str) -> Any:
    """The inputs with every floating-point tensor rescaled by `STRESS_TRANSFORMS[name]`."""
    transform = STRESS_TRANSFORMS[name]
    return tree_map(lambda t: transform(t).to(t.dtype) if t.is_floating_point() else t, values)


def refill(buffers: Any, fresh: Any) -> Any:
    """Copy `fresh` content into the existing input tensors (same storage, new values). Returns
    `buffers`' structure with `fresh`'s tensors in place of its own: equal to the refilled inputs
    bit for bit, a pristine copy of them that costs no further pass over the data (the time
    job's probes keep one), its other leaves the buffers' own."""
    drawn = tensors(fresh)
    for dst, src in zip(tensors(buffers), drawn, strict=True):
        dst.copy_(src)
    order = iter(drawn)
    return tree_map(lambda _: next(order), buffers)


def nbytes(values: Any) -> int:
    """Bytes of every tensor in a nested structure, each counted once."""
    return sum(t.numel() * t.element_size() for t in tensors(values))
