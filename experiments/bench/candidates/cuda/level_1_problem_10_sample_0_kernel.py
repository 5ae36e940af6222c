"""Typical CUDA answer to level1/10 (diag(a) @ B): a row scaling of B, never building the diagonal."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void row_scale_kernel(const float* __restrict__ a, const float* __restrict__ B,
                                 float* __restrict__ C, int64_t rows, int64_t cols) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols; i += stride) {
        C[i] = a[i / cols] * B[i];
    }
}

torch::Tensor row_scale_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && b.dim() == 2 && a.numel() == b.size(0), "shapes");
    auto A = a.contiguous();
    auto B = b.contiguous();
    auto C = torch::empty_like(B);
    const int64_t n = B.numel();
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 1 << 20);
    row_scale_kernel<<<blocks, 256>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                      B.size(0), B.size(1));
    return C;
}
"""

cpp_source = "torch::Tensor row_scale_cuda(torch::Tensor a, torch::Tensor b);"

row_scale_ext = load_inline(
    name="row_scale_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_scale_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return row_scale_ext.row_scale_cuda(a, B)
