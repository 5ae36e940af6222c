"""Typical CUDA answer to level1/27 (batch norm with batch statistics): one block per channel
computes mean and biased variance over (N, H, W) and writes the normalised channel."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

#define THREADS 256

__device__ float block_sum(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    const float total = buf[0];
    __syncthreads();
    return total;
}

__global__ void batch_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, int64_t N,
                                  int64_t C, int64_t HW, float eps) {
    __shared__ float buf[THREADS];
    const int64_t c = blockIdx.x, count = N * HW;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) s += x[((i / HW) * C + c) * HW + i % HW];
    const float mean = block_sum(s, buf) / (float)count;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const float d = x[((i / HW) * C + c) * HW + i % HW] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf) / (float)count + eps);
    const float scale = w[c] * rstd, shift = b[c] - mean * scale;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const int64_t at = ((i / HW) * C + c) * HW + i % HW;
        y[at] = x[at] * scale + shift;
    }
}

torch::Tensor batch_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4, "x must be a 4-D CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t N = xc.size(0), C = xc.size(1), HW = xc.size(2) * xc.size(3);
    batch_norm_kernel<<<C, THREADS>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                      b.contiguous().data_ptr<float>(), y.data_ptr<float>(), N, C, HW,
                                      (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor batch_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

batch_norm_ext = load_inline(
    name="batch_norm_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["batch_norm_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, channels: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(channels))
        self.bias = nn.Parameter(0.5 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return batch_norm_ext.batch_norm_cuda(x, self.weight, self.bias, self.eps)
