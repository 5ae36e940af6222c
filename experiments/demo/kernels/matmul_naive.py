import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matmul_source = r"""
#include <torch/extension.h>

torch::Tensor matmul_cpu(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), "shapes do not match");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    const int64_t n = a_c.size(0), k = a_c.size(1), m = b_c.size(1);
    auto c = torch::empty({n, m}, a_c.options());
    const float* pa = a_c.data_ptr<float>();
    const float* pb = b_c.data_ptr<float>();
    float* pc = c.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) {
            float sum = 0.0f;
            for (int64_t p = 0; p < k; ++p) {
                sum += pa[i * k + p] * pb[p * m + j];
            }
            pc[i * m + j] = sum;
        }
    }
    return c;
}
"""

matmul_ext = load_inline(
    name="demo_matmul_v0",
    cpp_sources=matmul_source,
    functions=["matmul_cpu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """C = A @ B with the textbook i-j-k triple loop."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_cpu(A, B)
