"""Typical CUDA answer to level1/11 (sum over dim 1, keepdim): one thread per output column."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

// x is [B, D1, D2], reduced over D1: one thread per (b, d2), reading along D1 (coalesced in d2).
__global__ void sum_dim1_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t B,
                              int64_t D1, int64_t D2) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= B * D2) return;
    const int64_t b = i / D2, d = i % D2;
    const float* p = x + b * D1 * D2 + d;
    float s = 0.f;
    for (int64_t k = 0; k < D1; ++k) s += p[k * D2];
    y[i] = s;
}

torch::Tensor sum_dim1_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "x must be a 3-D CUDA tensor");
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), D1 = xc.size(1), D2 = xc.size(2);
    auto y = torch::empty({B, 1, D2}, xc.options());
    const int threads = 256;
    sum_dim1_kernel<<<(B * D2 + threads - 1) / threads, threads>>>(xc.data_ptr<float>(),
        y.data_ptr<float>(), B, D1, D2);
    return y;
}
"""

cpp_source = "torch::Tensor sum_dim1_cuda(torch::Tensor x);"

sum_dim1_ext = load_inline(
    name="sum_dim1_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_dim1_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_dim1_ext.sum_dim1_cuda(x)
