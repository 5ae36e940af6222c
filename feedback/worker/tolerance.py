"""Compare a candidate's output with the reference's, under a named tolerance policy.

Policies (the name and its numbers are recorded in every `Correctness.tolerance`):

- `kernelbench`: today's KernelBench, `|got - ref| <= atol + rtol * |ref|` elementwise with
  atol = rtol = 1e-4 (fp32/fp64) or 1e-2 (fp16/bf16), against the problem-dtype reference.
- `kernelbench-v0`: the paper's setting, the same test with 1e-2 for every dtype.
- `fp64-relative` (default): the reference also runs in float64 (`Model.double()` on float64 copies
  of the inputs, same weights), giving `ref64`. With `ref32` the reference in the problem's dtype,
  per output tensor:

      E = max_i |ref32_i - ref64_i|           (the fp32 reference's own worst error)
      S = max_i |ref64_i|                      (the output's scale)
      accept iff for every element  |got_i - ref64_i| <= FACTOR * E + FLOOR * S

  with FACTOR = 16 and FLOOR = max(1e-5, 8 * eps(dtype)). Why this shape: an honest kernel that sums
  in another order (split-K, pairwise, a plain sequential loop) has errors of the same kind as the
  reference's own, a small multiple of E, or tiny against S (measured on CPU for a 4096-long matmul
  and 16384-long sums: worst honest ratio to the allowance 0.21). Approximations are a different
  kind of error: tanh-GELU for exact GELU (about 3x over), TF32 or fp16 inputs (20x), bf16 math
  (150x+), a skipped normalisation (1e6x). E and S are taken over the whole tensor, not per element,
  because an honest kernel's error at one element is unrelated to the reference's error at that
  same element (which may be 0 by luck). If the model cannot run in float64, the `kernelbench`
  numbers are used instead and the recorded policy says so.

Every policy: integer and bool outputs must be equal; non-finite values must sit where the
reference's are (same NaN/inf pattern); shape mismatch is `shape_mismatch`; dtype or device
mismatch is `mismatch`. Relative errors divide by `|ref| + eps(dtype) * S` so that they stay finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from feedback.result import Status, Tolerance

FACTOR = 16.0
FLOOR = 1e-5
POLICIES = ("fp64-relative", "kernelbench", "kernelbench-v0")


def tolerance_for(policy: str, dtype: torch.dtype) -> Tolerance:
    """The numbers a policy uses for outputs of `dtype` (for fp64-relative: floor and factor)."""
    half = dtype in (torch.float16, torch.bfloat16)
    if policy == "kernelbench":
        value = 1e-2 if half else 1e-4
        return Tolerance(policy=policy, atol=value, rtol=value)
    if policy == "kernelbench-v0":
        return Tolerance(policy=policy, atol=1e-2, rtol=1e-2)
    if policy == "fp64-relative":
        eps = torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
        return Tolerance(policy=policy, atol=max(FLOOR, 8 * eps), rtol=FACTOR)
    raise ValueError(f"unknown tolerance policy {policy!r} (known: {', '.join(POLICIES)})")


@dataclass
class Comparison:
    """The verdict on one output structure, plus the error statistics the report shows."""

    status: Status = Status.ok
    message: str = ""
    tolerance: Tolerance | None = None
    max_abs: float = 0.0
    mean_abs: float = 0.0
    max_rel: float = 0.0
    mean_rel: float = 0.0
    excess: float = 0.0
    worst_index: list[int] | None = None
    expected: float | None = None
    got: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == Status.ok


def compare(got: Any, ref: Any, ref64: Any | None, policy: str, figures: bool = True) -> Comparison:
    """Compare two output structures (a tensor, or tuples/lists of them, or plain values).
    `figures=False`: a passing verdict carries no error figures (zeros), which saves passes over
    the data (the time job's probes and spot checks read the verdict only); a failing one is
    the full comparison."""
    pairs, problem = _flatten(got, ref, ref64, "output")
    if problem:
        return problem
    verdicts = []
    for path, g, r, r64 in pairs:
        if not isinstance(r, torch.Tensor):
            if not _same_value(g, r):
                return Comparison(Status.mismatch, f"{path}: got {g!r}, expected {r!r}")
            continue
        one = _compare_tensor(path, g, r, r64, policy, figures)
        if not one.ok:
            return one
        verdicts.append(one)
    if not verdicts:
        return Comparison()
    worst = max(verdicts, key=lambda v: v.excess)
    worst.max_abs = max(v.max_abs for v in verdicts)
    worst.max_rel = max(v.max_rel for v in verdicts)
    worst.mean_abs = sum(v.mean_abs for v in verdicts) / len(verdicts)
    worst.mean_rel = sum(v.mean_rel for v in verdicts) / len(verdicts)
    worst.notes = sorted({n for v in verdicts for n in v.notes})
    return worst


def every_path(ref: Any, ref64: Any | None, policy: str) -> None:
    """`compare` of the reference's output with itself down each of its paths (with and without
    figures, and the general one that non-finite values take): the trusted operators a trial
    runs are recorded from this (harness.py), so each path's must be among them."""
    compare(ref, ref, ref64, policy)
    compare(ref, ref, ref64, policy, figures=False)
    pairs, _ = _flatten(ref, ref, ref64, "output")
    for path, g, r, r64 in pairs:
        if isinstance(r, torch.Tensor) and r.is_floating_point() and not r.is_complex():
            use = policy if r64 is not None or policy != "fp64-relative" else "kernelbench"
            target = (r64 if use == "fp64-relative" else r).to(torch.float64)
            _compare_general(path, g.to(torch.float64), target, r, tolerance_for(use, r.dtype))


def _flatten(got: Any, ref: Any, ref64: Any, path: str):
    """Pair up leaves of two structures; a structural difference is returned as a Comparison."""
    if isinstance(ref, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(ref):
            shown = f"{type(got).__name__} of {len(got)}" if isinstance(got, (tuple, list)) else type(got).__name__
            return [], Comparison(Status.shape_mismatch,
                                  f"{path}: expected a {type(ref).__name__} of {len(ref)} outputs, got {shown}")
        pairs = []
        subs = ref64 if isinstance(ref64, (tuple, list)) else [None] * len(ref)
        for i, (g, r, r64) in enumerate(zip(got, ref, subs)):
            more, problem = _flatten(g, r, r64, f"{path}[{i}]")
            if problem:
                return [], problem
            pairs += more
        return pairs, None
    if isinstance(ref, torch.Tensor) and not isinstance(got, torch.Tensor):
        return [], Comparison(Status.mismatch, f"{path}: expected a torch.Tensor, got {type(got).__name__}")
    return [(path, got, ref, ref64 if isinstance(ref64, torch.Tensor) else None)], None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-5 * max(abs(a), abs(b), 1e-30)
    try:
        return bool(a == b)
    except Exception:
        return False


def _compare_tensor(path: str, got: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor | None,
                    policy: str, figures: bool = True) -> Comparison:
    if got.shape != ref.shape:
        return Comparison(Status.shape_mismatch,
                          f"{path}: shape {list(got.shape)}, expected {list(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison(Status.mismatch, f"{path}: dtype {got.dtype}, expected {ref.dtype}")
    if got.device != ref.device:
        return Comparison(Status.mismatch, f"{path}: on device {got.device}, expected {ref.device}")
    if ref.is_complex():
        got, ref = torch.view_as_real(got), torch.view_as_real(ref)
        ref64 = torch.view_as_real(ref64) if ref64 is not None and ref64.is_complex() else None
    if not ref.is_floating_point():
        return _compare_exact(path, got, ref)
    if policy == "fp64-relative" and (ref64 is None or not ref64.is_floating_point()):
        verdict = _compare_tensor(path, got, ref, None, "kernelbench", figures)
        verdict.notes.append("float64 reference unavailable; kernelbench tolerance used")
        return verdict
    tol = tolerance_for(policy, ref.dtype)
    target = ref64 if policy == "fp64-relative" else ref
    verdict = _compare_finite(path, got, target, ref, tol, figures)
    if verdict is None and not figures:  # it did not pass as it stands: the whole comparison
        verdict = _compare_finite(path, got, target, ref, tol)
    if verdict is not None:
        return verdict
    return _compare_general(path, got.to(torch.float64), target.to(torch.float64), ref, tol)


def _compare_finite(path: str, got: torch.Tensor, target: torch.Tensor, ref: torch.Tensor,
                    tol: Tolerance, figures: bool = True) -> Comparison | None:
    """`_compare_general`'s verdict and figures for outputs whose every element is finite in both
    tensors (None otherwise): about half the passes over the data and two device synchronisations
    instead of a dozen, no boolean indexing. On the H200 the general path took ~0.1 s for a large
    elementwise output, 24 times per candidate timing (its probes and spot checks) and 13 times
    per correctness job: most of their hold on the device. Without `figures`, a pass without
    figures or None; under fp64-relative that takes one pass over the data, the allowance being
    one number.

    Memory: `got` and `target` (ref64, or ref) stay in their own dtypes and are compared `CHUNK`
    elements at a time in float64, so the comparison's own arrays stay below a few `CHUNK`s
    however large the output. Whole float64 copies of a 5 GB float32 output (level1/26 at its
    unseen size: 1.4 G elements, 10 GB each in float64) ran an 80 GB GPU out of memory. Up to
    `CHUNK` elements every figure equals the general path's to the last bit; beyond, the means
    are sums of the chunks' means (rounding apart) and the rest is equal."""
    g, t, r = got.reshape(-1), target.reshape(-1), ref.reshape(-1)
    n = t.numel()
    if n == 0:
        return None
    spans = [(lo, min(lo + CHUNK, n)) for lo in range(0, n, CHUNK)]
    fp64_relative = tol.policy == "fp64-relative"
    if fp64_relative and not figures and t.dtype == torch.float64:
        return _passes(g, t, r, spans, tol, ref.dtype)
    kept, checked = None, []
    for lo, hi in spans:
        err, target_abs = _chunk(g[lo:hi], t[lo:hi])
        ref_err = err.new_zeros(()) if not fp64_relative else _ref_err(r[lo:hi], t[lo:hi])
        checked.append(torch.stack([torch.isfinite(err).all().to(torch.float64),
                                    target_abs.max(), ref_err, err.max()]))
        if len(spans) == 1:  # else made again for the figures: one chunk's arrays at a time
            kept = err, target_abs
        del err, target_abs
    checked = torch.stack(checked).tolist()
    if not all(row[0] for row in checked):  # |v - t| is finite exactly where both are
        return None
    scale = max(row[1] for row in checked)
    if fp64_relative:  # one allowance everywhere: a scalar, not an output-sized array
        ref_err = max(row[2] for row in checked)
        value = _allowance(tol, ref_err, scale, ref.dtype)
        if not figures:  # rounding is monotonic: max(err / a) > 1 exactly when max(err) / a > 1
            over = max(row[3] for row in checked) / value > 1
            return None if over else Comparison(tolerance=tol)
        allowed = torch.full((), value, dtype=torch.float64, device=t.device)
    else:
        allowed = None
    outs = []
    for lo, hi in spans:
        err, target_abs = kept if kept is not None else _chunk(g[lo:hi], t[lo:hi])
        kept = None
        outs.append(_chunk_figures(g[lo:hi], t[lo:hi], err, target_abs, allowed, tol, scale,
                                   ref.dtype, figures))
        del err, target_abs  # a chunk's arrays go before the next chunk's are made
    if not figures:
        return None if bool(torch.stack(outs).any()) else Comparison(tolerance=tol)
    rows = torch.stack(outs).tolist()
    c = max(range(len(rows)), key=lambda i: (rows[i][4], -i))  # the first chunk with the worst
    max_abs, _, max_rel, _, excess, expected, got_w, _, err_w, allowed_w, worst = rows[c]
    if len(rows) == 1:
        mean_abs, mean_rel, over = rows[0][1], rows[0][3], rows[0][7]
    else:
        sizes = [hi - lo for lo, hi in spans]
        mean_abs = sum(row[1] * k for row, k in zip(rows, sizes)) / n
        mean_rel = sum(row[3] * k for row, k in zip(rows, sizes)) / n
        max_abs, max_rel = max(row[0] for row in rows), max(row[2] for row in rows)
        over = sum(row[7] for row in rows)
    return _verdict(path, tol, spans[c][0] + int(worst), ref.shape, n, int(over), max_abs,
                    mean_abs, max_rel, mean_rel, excess, expected, got_w, err_w, allowed_w)


CHUNK = 1 << 24
"""Elements `_compare_finite` compares at a time: its float64 arrays take 128 MB each."""


def _passes(g: torch.Tensor, t: torch.Tensor, r: torch.Tensor, spans: list[tuple[int, int]],
            tol: Tolerance, dtype: torch.dtype) -> Comparison | None:
    """`_compare_finite` without figures under fp64-relative, `t` float64: a pass, or None. The
    same numbers from a third of the passes over the data: `g - t` and `r - t` are each one
    kernel that promotes to float64 as it reads (what `g.to(float64) - t` computes, without the
    copy), and the most of |x| is the larger of -min and max from one `aminmax`, which also
    gives the finiteness test (a NaN carries into both ends, an infinity is one of them). Only
    where `r - t` is not finite (the float32 reference overflowed) is its chunk's largest error
    taken as `_compare_finite` takes it, non-finite elements counting 0. On an H100 the time
    job's probes and spot checks (two comparisons a probe) held the device alone for 0.75 s a
    candidate in all (run 71); a 512 M-element output's comparison read and wrote about 3 GB a
    chunk of `CHUNK`, this about 1 GB."""
    ends = []
    for lo, hi in spans:
        tc = t[lo:hi]
        ends.append(torch.stack([*torch.aminmax(g[lo:hi] - tc), *torch.aminmax(tc),
                                 *torch.aminmax(r[lo:hi] - tc)]))
    rows = torch.stack(ends).tolist()
    if not all(math.isfinite(x) for row in rows for x in row[:4]):
        return None  # a non-finite difference or target: the general path decides
    worst = max(max(-row[0], row[1]) for row in rows)
    scale = max(max(-row[2], row[3]) for row in rows)
    ref_err = 0.0
    for (lo, hi), row in zip(spans, rows):
        if math.isfinite(row[4]) and math.isfinite(row[5]):
            ref_err = max(ref_err, -row[4], row[5])
        else:
            ref_err = max(ref_err, _ref_err(r[lo:hi], t[lo:hi]).item())
    value = _allowance(tol, ref_err, scale, dtype)
    return None if worst / value > 1 else Comparison(tolerance=tol)


def _allowance(tol: Tolerance, ref_err: float, scale: float, dtype: torch.dtype) -> float:
    """fp64-relative's one allowance for every element: rtol x the reference's own error, atol x
    the largest |target|, and the dtype's smallest normal so that an exact zero passes."""
    return tol.rtol * ref_err + tol.atol * scale + torch.finfo(dtype).tiny


def _ref_err(ref: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A chunk's max |ref - target| in float64, non-finite elements counting 0: the reference's
    own error E of fp64-relative."""
    diff = ref.to(torch.float64) - target.to(torch.float64)
    return diff.abs_().nan_to_num_(0.0, 0.0, 0.0).max()


def _chunk(got: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A chunk's |got - target| and |target|, in float64."""
    v, t = got.to(torch.float64), target.to(torch.float64)
    return (v - t).abs_(), t.abs()


def _chunk_figures(got: torch.Tensor, target: torch.Tensor, err: torch.Tensor,
                   target_abs: torch.Tensor, allowed: torch.Tensor | None, tol: Tolerance,
                   scale: float, dtype: torch.dtype, figures: bool) -> torch.Tensor:
    """One chunk's figures in one tensor: whether an element is over (without `figures`), else
    max |err|, mean |err|, max rel, mean rel, the worst ratio, target, got, elements over, |err|
    and allowance at the worst, and its index in the chunk."""
    if allowed is None:  # kernelbench's: atol + rtol * |target|, per element
        allowed = tol.atol + tol.rtol * target_abs
    ratio = err / allowed
    if not figures:
        return (ratio > 1).any()
    target_abs.add_(torch.finfo(dtype).eps * scale).add_(torch.finfo(dtype).tiny)
    rel = torch.div(err, target_abs, out=target_abs)  # written over |target|
    worst = ratio.argmax()
    allowed_w = allowed if allowed.dim() == 0 else allowed[worst]
    return torch.stack([err.max(), err.mean(), rel.max(), rel.mean(), ratio[worst],
                        target[worst].to(torch.float64), got[worst].to(torch.float64),
                        (ratio > 1).sum().to(torch.float64), err[worst], allowed_w,
                        worst.to(torch.float64)])


def _verdict(path: str, tol: Tolerance, flat_worst: int, shape: torch.Size, numel: int, over: int,
             max_abs: float, mean_abs: float, max_rel: float, mean_rel: float, excess: float,
             expected: float, got: float, err_w: float, allowed_w: float) -> Comparison:
    """The Comparison of a float output from its figures (both paths)."""
    result = Comparison(tolerance=tol, max_abs=max_abs, mean_abs=mean_abs, max_rel=max_rel,
                        mean_rel=mean_rel, excess=excess, worst_index=_unravel(flat_worst, shape),
                        expected=expected, got=got)
    if over:
        result.status = Status.mismatch
        result.message = (f"{path}: {over} of {numel} elements outside tolerance ({tol.policy}); "
                          f"worst at {result.worst_index}: expected {result.expected:.8g}, got "
                          f"{result.got:.8g} (|error| {err_w:.3g}, allowed "
                          f"{allowed_w:.3g}); max abs error {result.max_abs:.3g}")
    return result


def _compare_general(path: str, value: torch.Tensor, target: torch.Tensor, ref: torch.Tensor,
                     tol: Tolerance) -> Comparison:
    """Any float output, non-finite values included (their pattern must be the reference's)."""
    policy = tol.policy
    finite = torch.isfinite(target)
    bad = _nonfinite_mismatch(value, target, finite)
    if bad is not None:
        index = _unravel(bad, ref.shape)
        return Comparison(Status.mismatch, f"{path}: non-finite value where the reference has "
                          f"{target.flatten()[bad].item()!r} (at {index}, got "
                          f"{value.flatten()[bad].item()!r})", tol, worst_index=index)
    value, target = value[finite], target[finite]
    if target.numel() == 0:
        return Comparison(tolerance=tol)
    scale = target.abs().max().item()
    err = (value - target).abs()
    if policy == "fp64-relative":
        ref_err = _ref_err(ref[finite], target).item()
        allowed = torch.full_like(err, _allowance(tol, ref_err, scale, ref.dtype))
    else:
        allowed = tol.atol + tol.rtol * target.abs()
    rel = err / (target.abs() + torch.finfo(ref.dtype).eps * scale + torch.finfo(ref.dtype).tiny)
    ratio = err / allowed
    worst = int(ratio.argmax().item())
    flat_worst = int(torch.nonzero(finite.flatten())[worst].item())
    over = int((ratio > 1).sum().item())
    return _verdict(path, tol, flat_worst, ref.shape, err.numel(), over, err.max().item(),
                    err.mean().item(), rel.max().item(), rel.mean().item(), ratio[worst].item(),
                    target[worst].item(), value[worst].item(), err[worst].item(),
                    allowed[worst].item())


def _nonfinite_mismatch(value: torch.Tensor, target: torch.Tensor, finite: torch.Tensor) -> int | None:
    """Flat index of the first element whose NaN/inf status differs from the reference's."""
    same_nan = torch.isnan(value) == torch.isnan(target)
    same_inf = torch.where(torch.isinf(target), value == target, ~torch.isinf(value))
    wrong = ~(same_nan & same_inf) | (finite & ~torch.isfinite(value))
    if not bool(wrong.any()):
        return None
    return int(torch.nonzero(wrong.flatten())[0].item())


def _compare_exact(path: str, got: torch.Tensor, ref: torch.Tensor) -> Comparison:
    wrong = (got != ref).flatten()
    count = int(wrong.sum().item())
    tol = Tolerance(policy="exact", atol=0.0, rtol=0.0)
    if not count:
        return Comparison(tolerance=tol)
    first = int(torch.nonzero(wrong)[0].item())
    index = _unravel(first, ref.shape)
    expected, value = ref.flatten()[first].item(), got.flatten()[first].item()
    return Comparison(Status.mismatch, f"{path}: {count} of {ref.numel()} integer elements differ; first "
                      f"at {index}: expected {expected}, got {value}", tol, max_abs=float(abs(expected - value)),
                      excess=float("inf"), worst_index=index, expected=float(expected), got=float(value))


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return list(reversed(index))
