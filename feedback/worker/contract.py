"""The input contract: structure every `get_inputs()` draw has, and the stress transforms that keep it.

A candidate may exploit anything `get_inputs()` guarantees (a kernel for `tril(A @ B)` with
lower-triangular `A` and `B` skips the zero triangle; a Cholesky-based kernel needs a positive
definite input; a cross-entropy kernel trusts its labels). So every input it is judged on must be
one those draws could produce (issue 12). The numeric stress pass (issue 4, class 14) rescales the
floating-point inputs; a rescaling is applied only when the transformed inputs still satisfy every
invariant inferred here, checked on the very tensors the trial would use, never assumed.

Inferred per floating-point input tensor, over several secret-seeded draws (`observe`), keeping
only what held in *every* draw (so more draws can only drop invariants; with few draws some
invariant may hold by chance, which only makes the stress pass skip more, never judge an input
outside the contract):

- exact-zero pattern: positions that were exactly 0 in every draw (triangular, banded, masked);
- sign: every value >= 0, > 0, <= 0 or < 0;
- range: inside [0, 1] or [-1, 1] (probabilities, uniform draws, tanh/cosine values);
- integer values (labels or counts stored as floats);
- symmetry of the last two (square) dimensions, and positive definiteness of symmetric matrices
  (Cholesky in float64; matrices up to `PD_MAX` rows);
- constant sums along a dimension (each row of a probability table sums to 1);
- the whole tensor identical in every draw (a fixed table the problem always passes).

Integer and bool tensors (indices, labels, masks) are never transformed. Relations *between*
inputs (a target that must match a prediction's shape of values) are not inferred: a problem whose
contract lives there keeps its stress pass only as far as the per-tensor invariants allow.
Inputs whose shapes differ between draws get no stress pass at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from feedback.worker.inputs import tensors

MIN_DRAWS = 3
PD_MAX = 2048
SUM_RTOL = 1e-5


@dataclass
class Leaf:
    """What held so far for one floating-point input tensor."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    zeros: torch.Tensor | None = None
    signs: set[str] = field(default_factory=lambda: {">= 0", "> 0", "<= 0", "< 0"})
    ranges: set[str] = field(default_factory=lambda: {"[0, 1]", "[-1, 1]"})
    integer: bool = True
    symmetric: bool = True
    definite: bool = True
    sums: dict[int, float] = field(default_factory=dict)
    first: torch.Tensor | None = None
    fixed: bool = True


def _sign_holds(x: torch.Tensor, sign: str) -> bool:
    return bool({">= 0": x >= 0, "> 0": x > 0, "<= 0": x <= 0, "< 0": x < 0}[sign].all())


def _range_holds(x: torch.Tensor, bounds: str) -> bool:
    low = 0.0 if bounds == "[0, 1]" else -1.0
    return bool(((x >= low) & (x <= 1.0)).all())


def _is_symmetric(x: torch.Tensor) -> bool:
    return x.dim() >= 2 and x.shape[-1] == x.shape[-2] > 1 and bool(torch.equal(x, x.transpose(-1, -2)))


def _is_definite(x: torch.Tensor) -> bool:
    if x.shape[-1] > PD_MAX:
        return False
    _, info = torch.linalg.cholesky_ex(x.double())
    return bool((info == 0).all())


def _constant_sums(x: torch.Tensor) -> dict[int, float]:
    """Dimensions along which every slice of `x` sums to one and the same value."""
    found = {}
    for dim in range(x.dim()):
        if x.shape[dim] < 2 or x.numel() == 0:
            continue
        sums = x.double().sum(dim)
        value = float(sums.flatten()[0])
        if _sums_match(x, dim, value):
            found[dim] = value
    return found


def _sums_match(x: torch.Tensor, dim: int, value: float) -> bool:
    sums, scale = x.double().sum(dim), x.double().abs().sum(dim).max().item()
    return bool(((sums - value).abs() <= SUM_RTOL * max(scale, abs(value), 1e-30)).all())


class Contract:
    """Invariants of the floating-point inputs over the draws seen (`observe`), and the test a
    transformed input set must pass (`broken`)."""

    def __init__(self) -> None:
        self.draws = 0
        self.leaves: dict[int, Leaf] = {}
        self.varying = False  # shapes or dtypes changed between draws

    def observe(self, values: Any) -> None:
        """Fold one `get_inputs()` draw into the invariants."""
        self.draws += 1
        for i, x in enumerate(tensors(values)):
            if not x.is_floating_point():
                continue
            leaf = self.leaves.get(i)
            if leaf is None:
                leaf = self.leaves[i] = Leaf(tuple(x.shape), x.dtype, zeros=x == 0, first=x.clone(),
                                             symmetric=_is_symmetric(x), sums=_constant_sums(x))
                leaf.definite = leaf.symmetric and _is_definite(x)
            elif (tuple(x.shape), x.dtype) != (leaf.shape, leaf.dtype):
                self.varying = True
                continue
            else:
                leaf.zeros &= x == 0
                leaf.fixed = leaf.fixed and bool(torch.equal(x, leaf.first))
                leaf.symmetric = leaf.symmetric and _is_symmetric(x)
                leaf.definite = leaf.definite and leaf.symmetric and _is_definite(x)
                leaf.sums = {d: v for d, v in leaf.sums.items() if _sums_match(x, d, v)}
            leaf.signs = {s for s in leaf.signs if _sign_holds(x, s)}
            leaf.ranges = {r for r in leaf.ranges if _range_holds(x, r)}
            leaf.integer = leaf.integer and bool((x == x.round()).all())

    def describe(self) -> list[str]:
        """The invariants, one line each, for the result's record."""
        if self.varying:
            return ["input shapes or dtypes vary between draws"]
        lines = []
        for i, leaf in sorted(self.leaves.items()):
            lines += [f"input {i}: {text}" for text in self._invariants(leaf)]
        return lines

    def _invariants(self, leaf: Leaf) -> list[str]:
        if leaf.fixed and self.draws > 1:
            return ["identical in every draw"]
        found = []
        n_zero = int(leaf.zeros.sum()) if leaf.zeros is not None else 0
        if n_zero:
            found.append(f"exactly 0 at the same {n_zero} of {leaf.zeros.numel()} positions")
        for strong, weak in (("> 0", ">= 0"), ("< 0", "<= 0")):
            shown = strong if strong in leaf.signs else weak if weak in leaf.signs else None
            found += [f"every value {shown}"] if shown else []
        found += [f"values in {r}" for r in sorted(leaf.ranges, key=len)[:1]]
        if leaf.integer:
            found.append("integer values")
        if leaf.definite:
            found.append("symmetric positive definite")
        elif leaf.symmetric:
            found.append("symmetric")
        found += [f"sums to {v:.6g} along dim {d}" for d, v in sorted(leaf.sums.items())]
        return found

    def broken(self, values: Any) -> list[str]:
        """The invariants `values` (a transformed input set) breaks; empty when it keeps all."""
        if self.varying:
            return ["input shapes or dtypes vary between draws, so no invariant can be checked"]
        if self.draws == 0:
            return ["no draw was observed"]
        found = []
        for i, x in enumerate(tensors(values)):
            leaf = self.leaves.get(i)
            if leaf is None or not x.is_floating_point():
                continue
            if tuple(x.shape) != leaf.shape:
                found.append(f"input {i}: shape {list(x.shape)}, every draw had {list(leaf.shape)}")
                continue
            found += [f"input {i}: {text}" for text in self._broken_leaf(leaf, x)]
        return found

    def _broken_leaf(self, leaf: Leaf, x: torch.Tensor) -> list[str]:
        if leaf.fixed and self.draws > 1:
            return [] if torch.equal(x, leaf.first) else ["every draw is the same tensor"]
        found = []
        if leaf.zeros is not None and bool((leaf.zeros & (x != 0)).any()):
            found.append(f"exact-zero pattern (the {int(leaf.zeros.sum())} positions that are 0 "
                         "in every draw)")
        found += [f"sign (every value {s})" for s in sorted(leaf.signs) if not _sign_holds(x, s)]
        found += [f"range (values in {r})" for r in sorted(leaf.ranges) if not _range_holds(x, r)]
        if leaf.integer and not bool((x == x.round()).all()):
            found.append("integer values")
        if leaf.symmetric and not _is_symmetric(x):
            found.append("symmetry")
        elif leaf.definite and not _is_definite(x):
            found.append("positive definiteness")
        found += [f"sums ({v:.6g} along dim {d})" for d, v in sorted(leaf.sums.items())
                  if not _sums_match(x, d, v)]
        return found
