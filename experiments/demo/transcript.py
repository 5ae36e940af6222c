"""Writes `demo.jsonl`, the offline demo transcript, from the kernels in `kernels/`.

The transcript is written by this project to show the loop working; it is not any model's
output. Each entry is (problem, index, turn, what the "model" says, the kernel file or None for
an answer without code). Run `python experiments/demo/transcript.py` after editing a kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
KERNELS = HERE / "kernels"
RELU, MATMUL, GEMM = "level1/19_relu", "level1/1_square_matmul", "level2/1_gemm_bias_relu"

ENTRIES: list[tuple[str, int, int, str, str | None]] = [
    # ReLU: a compile error, a value mismatch, then a correct kernel that only ties eager.
    (RELU, 0, 0, "ReLU is elementwise, so one C++ loop over the flattened tensor suffices.",
     "relu_undeclared.py"),
    (RELU, 0, 1, "The loop bound `n` was never declared; it is the element count. I also keep a "
     "small negative slope so that nothing is lost for negative inputs.", "relu_leaky.py"),
    (RELU, 0, 2, "The reference is a plain ReLU: negative inputs must map to exactly zero. "
     "Removing the slope.", "relu_loop.py"),
    (RELU, 0, 3, "The kernel is correct and its time is dominated by the call itself; "
     "submitting it again unchanged to confirm the measurement.", "relu_loop.py"),
    # Square matmul: correct but slow, then a rejected answer, a better loop order, no code.
    (MATMUL, 0, 0, "A direct i-j-k triple loop computes C = A @ B.", "matmul_naive.py"),
    (MATMUL, 0, 1, "torch.matmul already calls a tuned BLAS, so I will use it directly.",
     "matmul_torch.py"),
    (MATMUL, 0, 2, "A custom kernel is required. Reordering the loops to i-k-j makes the inner "
     "loop walk rows of B and C contiguously, which the compiler vectorises.", "matmul_ikj.py"),
    (MATMUL, 0, 3, "Beating a tuned BLAS at this size would need register blocking and packing. "
     "I would tile C in 4x16 blocks with the B panel packed once per call, keeping the i-k-j "
     "kernel as the fallback for the edges.", None),
    # GEMM + bias + ReLU: a mismatch, a runtime error, then a fused kernel faster than eager.
    (GEMM, 0, 0, "Fusing the GEMM, the bias and the ReLU into one pass avoids two extra "
     "passes over the output.", "gemm_fused_one_bias.py"),
    (GEMM, 0, 1, "I forgot the model's second bias. Summing the two bias vectors first keeps "
     "one bias in the kernel. Passing the weight transposed should help the row access.",
     "gemm_fused_transposed.py"),
    (GEMM, 0, 2, "The kernel expects nn.Linear's [out, in] layout, so the weight goes in "
     "untransposed.", "gemm_fused.py"),
    (GEMM, 0, 3, "The fused kernel is correct and faster than eager; at this size the GEMM "
     "is small enough that I have no further change to propose.", None),
    # Extra one-shot samples, for `agent.sample --k 2` (index 1, turn 0 of each problem).
    (RELU, 1, 0, "ReLU is elementwise: one C++ loop mapping negatives to zero.", "relu_loop.py"),
    (MATMUL, 1, 0, "An i-k-j loop order keeps the inner loop contiguous.", "matmul_ikj.py"),
    (GEMM, 1, 0, "One fused pass computes the GEMM, both biases and the ReLU.", "gemm_fused.py"),
]


def response(prose: str, kernel: str | None) -> str:
    """The "model's" raw text: prose, then the kernel in one fenced block (or no block)."""
    if kernel is None:
        return prose
    return f"{prose}\n\n```python\n{(KERNELS / kernel).read_text()}```\n"


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
