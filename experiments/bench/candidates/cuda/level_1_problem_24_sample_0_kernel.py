"""Typical CUDA answer to level1/24 (log-softmax over rows): one block per row, max then sum."""

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

__device__ float block_max(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = THREADS / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    const float top = buf[0];
    __syncthreads();
    return top;
}

__global__ void log_softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float buf[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
    m = block_max(m, buf);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += expf(row[c] - m);
    const float lse = m + logf(block_sum(s, buf));
    for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = row[c] - lse;
}

torch::Tensor log_softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a 2-D CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    log_softmax_kernel<<<xc.size(0), THREADS>>>(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(1));
    return y;
}
"""

cpp_source = "torch::Tensor log_softmax_cuda(torch::Tensor x);"

log_softmax_ext = load_inline(
    name="log_softmax_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["log_softmax_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return log_softmax_ext.log_softmax_cuda(x)
