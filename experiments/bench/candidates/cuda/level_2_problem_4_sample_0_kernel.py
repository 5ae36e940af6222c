"""Typical CUDA answer to level2/4 (Linear, LeakyReLU 0.2, row log-sum-exp): the GEMM stays in
cuBLAS; one block per row fuses the LeakyReLU into a max-shifted log-sum-exp."""

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

__global__ void leaky_lse_kernel(const float* __restrict__ z, float* __restrict__ out, int cols) {
    __shared__ float buf[THREADS];
    const float* row = z + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = row[c];
        m = fmaxf(m, v > 0.f ? v : 0.2f * v);
    }
    m = block_max(m, buf);
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float v = row[c];
        s += expf((v > 0.f ? v : 0.2f * v) - m);
    }
    s = block_sum(s, buf);
    if (threadIdx.x == 0) out[blockIdx.x] = m + logf(s);
}

torch::Tensor leaky_lse_cuda(torch::Tensor z) {
    TORCH_CHECK(z.is_cuda() && z.dim() == 2, "z must be a 2-D CUDA tensor");
    auto zc = z.contiguous();
    auto out = torch::empty({zc.size(0), 1}, zc.options());
    leaky_lse_kernel<<<zc.size(0), THREADS>>>(zc.data_ptr<float>(), out.data_ptr<float>(), zc.size(1));
    return out;
}
"""

cpp_source = "torch::Tensor leaky_lse_cuda(torch::Tensor z);"

leaky_lse_ext = load_inline(
    name="leaky_lse_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["leaky_lse_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_lse_ext.leaky_lse_cuda(self.linear(x))
