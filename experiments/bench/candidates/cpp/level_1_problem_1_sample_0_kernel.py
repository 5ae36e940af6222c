"""Typical cpp-backend answer to level1/1 (square matmul): a cache-friendly i-k-j loop."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shape mismatch");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int64_t n = A.size(0), k = A.size(1), m = B.size(1);
    auto C = torch::zeros({n, m}, A.options());
    const float* pa = A.data_ptr<float>();
    const float* pb = B.data_ptr<float>();
    float* pc = C.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t p = 0; p < k; ++p) {
            const float aip = pa[i * k + p];
            const float* brow = pb + p * m;
            float* crow = pc + i * m;
            for (int64_t j = 0; j < m; ++j) {
                crow[j] += aip * brow[j];
            }
        }
    }
    return C;
}
"""

matmul_ext = load_inline(
    name="matmul_cpp",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
