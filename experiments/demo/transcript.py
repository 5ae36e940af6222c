"""Writes `demo.jsonl`, the offline demo transcript, from the kernels in `kernels/`.

The transcript is written by this project to show the loop working; it is not any model's
output. Each entry is (problem, index, turn, what the "model" says, the kernel or None for an
answer without code). A kernel is a file in `kernels/`, or a named edit of one (`EDITS`), the way a
model's next attempt edits its last. Run `python experiments/demo/transcript.py` after a change.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
RELU, MATMUL, GEMM = "level1/19_relu", "level1/1_square_matmul", "level2/1_gemm_bias_relu"

_RELU_DOC = ('"""ReLU as one C++ loop over the elements (vectorised by the compiler at -O3)."""',
             '"""ReLU as one C++ loop over the elements."""')
_GEMM_DOC = ('"""GEMM, both biases and ReLU fused into one C++ kernel; '
             'the two bias vectors are summed first."""')
_GEMM_CALL = "fused_ext.gemm_bias_relu(x, self.linear.weight, self.linear.bias + self.bias)"
EDITS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    # name: (kernel file, [(old, new), ...]); each `old` occurs exactly once.
    "relu_undeclared": ("relu_loop.py", [
        ("    const int64_t n = x_c.numel();\n", ""),
        ('"demo_relu_v2"', '"demo_relu_v0"'), _RELU_DOC]),
    "relu_leaky": ("relu_loop.py", [
        ("        po[i] = px[i] > 0.0f ? px[i] : 0.0f;",
         ("        // keep a small slope for negative inputs so gradients never vanish\n"
          "        po[i] = px[i] > 0.0f ? px[i] : 0.01f * px[i];")),
        ('"demo_relu_v2"', '"demo_relu_v1"'), _RELU_DOC]),
    # Python-only edits of the fused GEMM: the C++ and its build are shared (one compile).
    "gemm_fused_one_bias": ("gemm_fused.py", [
        (_GEMM_DOC, '"""GEMM, bias and ReLU fused into one C++ kernel."""'),
        (_GEMM_CALL, "fused_ext.gemm_bias_relu(x, self.linear.weight, self.linear.bias)")]),
    "gemm_fused_transposed": ("gemm_fused.py", [
        (_GEMM_DOC, ('"""GEMM, both biases and ReLU fused; the weight is passed as [in, out] '
                     'for row access."""')),
        (_GEMM_CALL, ("fused_ext.gemm_bias_relu(x, self.linear.weight.t(), "
                      "self.linear.bias + self.bias)"))]),
}

ENTRIES: list[tuple[str, int, int, str, str | None]] = [
    # ReLU: a compile error, a value mismatch, then a correct kernel, submitted twice.
    (RELU, 0, 0, "ReLU is elementwise, so one C++ loop over the flattened tensor suffices.",
     "relu_undeclared"),
    (RELU, 0, 1, ("The loop bound `n` was never declared; it is the element count. I also keep "
                  "a small negative slope so that nothing is lost for negative inputs."),
     "relu_leaky"),
    (RELU, 0, 2, ("The reference is a plain ReLU: negative inputs must map to exactly zero. "
                  "Removing the slope."), "relu_loop.py"),
    (RELU, 0, 3, ("The kernel is correct and its time is dominated by the call itself; "
                  "submitting it again unchanged to confirm the measurement."), "relu_loop.py"),
    # Square matmul: correct but slow, then a rejected answer, a better loop order, no code.
    (MATMUL, 0, 0, "A direct i-j-k triple loop computes C = A @ B.", "matmul_naive.py"),
    (MATMUL, 0, 1, "torch.matmul already calls a tuned BLAS, so I will use it directly.",
     "matmul_torch.py"),
    (MATMUL, 0, 2, ("A custom kernel is required. Reordering the loops to i-k-j makes the inner "
                    "loop walk rows of B and C contiguously, which the compiler vectorises."),
     "matmul_ikj.py"),
    (MATMUL, 0, 3, ("Beating a tuned BLAS at this size would need register blocking and "
                    "packing. I would tile C in 4x16 blocks with the B panel packed once per "
                    "call, keeping the i-k-j kernel as the fallback for the edges."), None),
    # GEMM + bias + ReLU: a mismatch, a runtime error, then the fused kernel, then no code.
    (GEMM, 0, 0, ("Fusing the GEMM, the bias and the ReLU into one pass avoids two extra "
                  "passes over the output."), "gemm_fused_one_bias"),
    (GEMM, 0, 1, ("I forgot the model's second bias. Summing the two bias vectors first keeps "
                  "one bias in the kernel. Passing the weight transposed should help the row "
                  "access."), "gemm_fused_transposed"),
    (GEMM, 0, 2, ("The kernel expects nn.Linear's [out, in] layout, so the weight goes in "
                  "untransposed."), "gemm_fused.py"),
    (GEMM, 0, 3, ("The fused kernel is correct and makes one pass over the output; at this "
                  "size I have no further change to propose."), None),
    # Extra one-shot samples, for `agent.sample --k 2` (index 1, turn 0 of each problem).
    (RELU, 1, 0, "ReLU is elementwise: one C++ loop mapping negatives to zero.", "relu_loop.py"),
    (MATMUL, 1, 0, "An i-k-j loop order keeps the inner loop contiguous.", "matmul_ikj.py"),
    (GEMM, 1, 0, "One fused pass computes the GEMM, both biases and the ReLU.", "gemm_fused.py"),
]


def kernel_source(kernel: str) -> str:
    """The text of a kernel file, or of a named edit of one."""
    if kernel not in EDITS:
        return (KERNELS / kernel).read_text()
    base, replacements = EDITS[kernel]
    text = (KERNELS / base).read_text()
    for old, new in replacements:
        if text.count(old) != 1:
            raise ValueError(f"edit {kernel}: {old!r} occurs {text.count(old)} times in {base}")
        text = text.replace(old, new)
    return text


def response(prose: str, kernel: str | None) -> str:
    """The "model's" raw text: prose, then the kernel in one fenced block (or no block)."""
    if kernel is None:
        return prose
    return f"{prose}\n\n```python\n{kernel_source(kernel)}```\n"


def entries() -> list[dict]:
    return [{"problem": p, "index": i, "turn": t, "response": response(prose, kernel),
             "note": "demo transcript written by kernel-refine, not model output"}
            for p, i, t, prose, kernel in ENTRIES]


def main() -> None:
    with (HERE / "demo.jsonl").open("w") as f:
        for entry in entries():
            f.write(json.dumps(entry) + "\n")


if __name__ == "__main__":
    main()
