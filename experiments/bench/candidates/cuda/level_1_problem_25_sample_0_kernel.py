"""Typical CUDA answer to level1/25 (LayerNorm over the last dim): one block per row, mean then
variance, then the affine step; the nn.LayerNorm module is kept for its weights."""

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

__global__ void layer_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, int cols,
                                  float eps) {
    __shared__ float buf[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += row[c];
    const float mean = block_sum(s, buf) / cols;
    float q = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float d = row[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) out[c] = (row[c] - mean) * rstd * w[c] + b[c];
}

torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a 2-D CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    layer_norm_kernel<<<xc.size(0), THREADS>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                               b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                               xc.size(1), (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor layer_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

layer_norm_ext = load_inline(
    name="layer_norm_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["layer_norm_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.norm = nn.LayerNorm(features)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm_ext.layer_norm_cuda(x, self.norm.weight, self.norm.bias, self.norm.eps)
