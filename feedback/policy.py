"""Library-op policy (issue 4, classes 8 and 9): did the candidate write the kernel, or call one?

Inputs are facts measured at run time, not read from source: the operators the candidate's
forward dispatched (feedback/worker/ops.py, which sees calls from Python and from C++ alike), the
operators the reference dispatched, library kernels the profiler saw on the GPU (cuBLAS, cuDNN
called without the dispatcher), and whether the candidate's own compiled code ran at all.

Policies (`EvalOptions.library_ops`):
- `allow`: anything goes (KernelBench's own rule; reproduces published numbers).
- `glue` (default): glue operators (allocation, views, reshapes, copies; `GLUE`) are free, and
  other library operators are allowed as long as they do not redo the whole reference: if every
  operator family the reference computes with is also computed by the candidate's library calls
  (`aten::mm` for a matmul problem, `aten::convolution` + `aten::relu` for conv+relu, or a call of
  the reference `Model` itself), the candidate has written no kernel that matters, and that is a
  violation. Keeping the convolution of a conv+bias+ReLU problem in cuDNN and fusing the rest is
  allowed. Families (`family`) make `aten::clamp_min` count as ReLU and `aten::addmm` as matmul.
- `strict`: every non-glue library operator is a violation: all compute in the candidate's kernels.

Under `glue` and `strict` the candidate's own compiled code (its extension functions, custom
operators or Triton kernels) must run on every scored call; a fallback path that never reaches it
is a violation (class 9). This module is pure: the worker measures, this decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

LibraryOps = Literal["strict", "glue", "allow"]
POLICIES = ("strict", "glue", "allow")

GLUE = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "fill", "zero", "scalar_tensor", "arange", "view", "reshape", "reshape_alias",
    "unsafe_view", "as_strided", "expand", "expand_as", "permute", "transpose", "t", "squeeze",
    "unsqueeze", "flatten", "unflatten", "slice", "select", "narrow", "split", "split_with_sizes",
    "chunk", "unbind", "alias", "detach", "contiguous", "clone", "copy", "to_copy", "to", "lift_fresh",
    "lift_fresh_copy", "resize", "set", "view_as", "local_scalar_dense", "item", "is_nonzero",
    "movedim", "swapaxes", "diagonal", "unfold", "resolve_conj", "resolve_neg", "view_as_real",
    "view_as_complex", "record_stream", "pin_memory", "is_pinned", "sym_size", "sym_stride",
    "sym_numel", "sym_storage_offset", "stride", "size", "numel", "dim", "equal",
})
"""Operators that move or describe memory without computing the problem's values."""

_FAMILIES: list[tuple[str, re.Pattern[str]]] = [
    ("matmul", re.compile(r"^(mm|bmm|addmm|addbmm|baddbmm|matmul|linear|mv|addmv|dot|vdot|einsum|"
                          r"tensordot|outer|ger|addr|scaled_mm|int_mm|addmm_activation|mkldnn_linear|"
                          r"fbgemm_linear.*|linalg_matmul|chain_matmul|linalg_multi_dot)$")),
    ("convolution", re.compile(r"conv(olution|\d|_|$)|convolution")),
    ("attention", re.compile(r"attention")),
    ("relu", re.compile(r"^(relu|relu6|clamp|clamp_min|clamp_max|threshold|hardtanh)$")),
    ("norm", re.compile(r"(layer|batch|group|instance|rms)_norm")),
    ("softmax", re.compile(r"^softmax$|^log_softmax$")),
    ("pool", re.compile(r"pool")),
    ("recurrent", re.compile(r"^(lstm|gru|rnn_tanh|rnn_relu)(_cell)?$|fused_lstm|fused_gru")),
]
_LIBRARY_KERNELS = {
    "matmul": re.compile(r"gemm|gemv|cublas|cutlass|xmma|sgemm|hgemm|magma", re.IGNORECASE),
    "convolution": re.compile(r"conv|cudnn|winograd|implicit_?gemm|wgrad|dgrad|fprop", re.IGNORECASE),
}


def base_name(op: str) -> str:
    """`aten::relu_` / `aten::_softmax` / `aten::native_layer_norm` -> `relu` / `softmax` /
    `layer_norm`: the operator with its namespace, in-place suffix and implementation prefix gone."""
    name = op.split("::", 1)[-1].split(".", 1)[0]
    name = name.rstrip("_").lstrip("_")
    for prefix in ("native_", "mkldnn_", "cudnn_", "miopen_", "slow_", "thnn_"):
        if name.startswith(prefix) and name != prefix.rstrip("_"):
            name = name[len(prefix):]
    return name.removesuffix("_forward").removesuffix("_legit_no_training").removesuffix("_legit")


def family(op: str) -> str:
    """The family an operator computes in (`matmul`, `convolution`, ...), else its base name."""
    name = base_name(op)
    for fam, pattern in _FAMILIES:
        if pattern.search(name):
            return fam
    return name


def is_library(op: str) -> bool:
    """An operator from torch's own namespaces (the candidate's custom operators are not)."""
    return op.split("::", 1)[0] in {"aten", "prim", "prims", "quantized", "mkldnn", "torchvision"}


def compute_families(ops: Iterable[str]) -> dict[str, list[str]]:
    """Family -> the library operators computing in it (glue left out)."""
    found: dict[str, list[str]] = {}
    for op in ops:
        if is_library(op) and base_name(op) not in GLUE:
            found.setdefault(family(op), []).append(op)
    return found


def kernel_families(kernels: Iterable[str]) -> dict[str, list[str]]:
    """Library kernels (by name, from the profiler) -> the family they compute in."""
    found: dict[str, list[str]] = {}
    for name in kernels:
        for fam, pattern in _LIBRARY_KERNELS.items():
            if pattern.search(name):
                found.setdefault(fam, []).append(name)
    return found


def library_violation(policy: str, candidate_ops: Mapping[str, int] | Iterable[str],
                      reference_ops: Mapping[str, int] | Iterable[str],
                      candidate_kernels: Iterable[str] = ()) -> str | None:
    """The message of a violation of `policy`, or None.

    Args:
        policy: `strict`, `glue` or `allow`.
        candidate_ops / reference_ops: operators dispatched during one forward of each.
        candidate_kernels: device kernels of one candidate forward that are not its own
            (profiler names); library kernels among them count as library calls.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown library-op policy {policy!r} (known: {', '.join(POLICIES)})")
    if policy == "allow":
        return None
    mine = compute_families(candidate_ops)
    for fam, names in kernel_families(candidate_kernels).items():
        mine.setdefault(fam, []).extend(names[:2])
    if policy == "strict":
        if mine:
            return (f"library operators compute in ModelNew.forward: {_shown(mine)}; the `strict` "
                    "library-op policy allows only glue operators (empty, view, reshape, "
                    "contiguous, copies): compute in your own kernel")
        return None
    theirs = compute_families(reference_ops)
    if theirs and set(theirs) <= set(mine):
        return (f"ModelNew.forward calls library operators that compute the whole reference "
                f"({_shown({f: mine[f] for f in theirs})}) instead of a kernel of its own (calling "
                "torch.matmul / F.conv2d / nn.Linear / the reference Model where the problem is "
                "about that operator); compute it in your kernel")
    return None


def own_code_violation(calls_without_own_code: Iterable[str]) -> str | None:
    """Class 9: scored calls on which none of the candidate's own compiled code ran."""
    missed = list(calls_without_own_code)
    if not missed:
        return None
    return (f"the candidate's own compiled code did not run on {len(missed)} scored call(s) "
            f"({', '.join(missed[:4])}): a fallback path (try/except, a flag, a size test) that "
            "never reaches the kernel; every scored call must run your kernel")


def _shown(families: Mapping[str, list[str]]) -> str:
    return ", ".join(sorted({op for ops in families.values() for op in ops[:2]}))
