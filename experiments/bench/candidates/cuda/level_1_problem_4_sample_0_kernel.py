"""Typical CUDA answer to level1/4 (matrix-vector product): one block per row, a tree sum."""

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

__global__ void matvec_kernel(const float* __restrict__ A, const float* __restrict__ x,
                              float* __restrict__ y, int64_t K) {
    __shared__ float buf[THREADS];
    const float* row = A + (int64_t)blockIdx.x * K;
    float acc = 0.f;
    for (int64_t k = threadIdx.x; k < K; k += THREADS) acc += row[k] * x[k];
    acc = block_sum(acc, buf);
    if (threadIdx.x == 0) y[blockIdx.x] = acc;
}

torch::Tensor matvec_cuda(torch::Tensor a, torch::Tensor x) {
    TORCH_CHECK(a.is_cuda() && x.is_cuda() && a.dim() == 2, "a must be a 2-D CUDA tensor");
    auto A = a.contiguous();
    auto X = x.contiguous();
    const int64_t M = A.size(0), K = A.size(1);
    TORCH_CHECK(X.numel() == K, "x must have K elements");
    auto y = torch::empty({M, 1}, A.options());
    matvec_kernel<<<M, THREADS>>>(A.data_ptr<float>(), X.data_ptr<float>(), y.data_ptr<float>(), K);
    return y;
}
"""

cpp_source = "torch::Tensor matvec_cuda(torch::Tensor a, torch::Tensor x);"

matvec_ext = load_inline(
    name="matvec_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["matvec_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return matvec_ext.matvec_cuda(A, x)
