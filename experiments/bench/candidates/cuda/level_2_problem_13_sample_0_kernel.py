"""Typical CUDA answer to level2/13 (residual add, LayerNorm, exact GELU): one block per row fuses
all three; nn.LayerNorm kept for its parameters."""

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

__global__ void add_ln_gelu_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                   const float* __restrict__ w, const float* __restrict__ b,
                                   float* __restrict__ y, int cols, float eps) {
    __shared__ float buf[THREADS];
    const int64_t base = (int64_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += x[base + c] + r[base + c];
    const float mean = block_sum(s, buf) / cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float d = x[base + c] + r[base + c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = (x[base + c] + r[base + c] - mean) * rstd * w[c] + b[c];
        y[base + c] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor add_ln_gelu_cuda(torch::Tensor x, torch::Tensor r, torch::Tensor w, torch::Tensor b,
                               double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.sizes() == r.sizes(), "bad input");
    auto X = x.contiguous();
    auto R = r.contiguous();
    auto y = torch::empty_like(X);
    add_ln_gelu_kernel<<<X.size(0), THREADS>>>(X.data_ptr<float>(), R.data_ptr<float>(),
                                               w.contiguous().data_ptr<float>(),
                                               b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                               X.size(1), (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor add_ln_gelu_cuda(torch::Tensor x, torch::Tensor r, torch::Tensor w, torch::Tensor b, double eps);"

add_ln_gelu_ext = load_inline(
    name="add_ln_gelu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_ln_gelu_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return add_ln_gelu_ext.add_ln_gelu_cuda(x, residual, self.norm.weight, self.norm.bias,
                                                self.norm.eps)
