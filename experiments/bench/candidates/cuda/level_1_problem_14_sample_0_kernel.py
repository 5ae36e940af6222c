"""Typical CUDA answer to level1/14 (argmax over dim 1): one thread per output column, the
first index of the largest value."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

// x is [B, D1, D2], reduced over D1: one thread per (b, d2), reading along D1 (coalesced in d2).
__global__ void argmax_dim1_kernel(const float* __restrict__ x, int64_t* __restrict__ y, int64_t B,
                              int64_t D1, int64_t D2) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= B * D2) return;
    const int64_t b = i / D2, d = i % D2;
    const float* p = x + b * D1 * D2 + d;
    float best = p[0];
    int64_t where = 0;
    for (int64_t k = 1; k < D1; ++k) {
        const float v = p[k * D2];
        if (v > best) { best = v; where = k; }
    }
    y[i] = where;
}

torch::Tensor argmax_dim1_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "x must be a 3-D CUDA tensor");
    auto xc = x.contiguous();
    const int64_t B = xc.size(0), D1 = xc.size(1), D2 = xc.size(2);
    auto y = torch::empty({B, D2}, xc.options().dtype(torch::kLong));
    const int threads = 256;
    argmax_dim1_kernel<<<(B * D2 + threads - 1) / threads, threads>>>(xc.data_ptr<float>(),
        y.data_ptr<int64_t>(), B, D1, D2);
    return y;
}
"""

cpp_source = "torch::Tensor argmax_dim1_cuda(torch::Tensor x);"

argmax_dim1_ext = load_inline(
    name="argmax_dim1_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["argmax_dim1_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return argmax_dim1_ext.argmax_dim1_cuda(x)
