"""Typical CUDA answer to level1/26 (RMS norm over the channels of NCHW): one thread per
(n, h, w), two passes over C."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                float* __restrict__ y, int64_t N, int64_t C, int64_t HW, float eps) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= N * HW) return;
    const int64_t n = i / HW, s = i % HW;
    const float* p = x + n * C * HW + s;
    float* q = y + n * C * HW + s;
    float acc = 0.f;
    for (int64_t c = 0; c < C; ++c) acc += p[c * HW] * p[c * HW];
    const float inv = 1.f / sqrtf(acc / (float)C + eps);
    for (int64_t c = 0; c < C; ++c) q[c * HW] = p[c * HW] * inv * w[c];
}

torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4, "x must be a 4-D CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t N = xc.size(0), C = xc.size(1), HW = xc.size(2) * xc.size(3);
    rms_norm_kernel<<<(N * HW + 255) / 256, 256>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                                   y.data_ptr<float>(), N, C, HW, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor w, double eps);"

rms_norm_ext = load_inline(
    name="rms_norm_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["rms_norm_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm_ext.rms_norm_cuda(x, self.weight, self.eps)
