"""Typical CUDA answer to level2/5 (Linear, batch norm with batch statistics, tanh): the GEMM
stays in cuBLAS; one block per feature column computes its batch mean and variance and writes
tanh of the normalised column."""

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

__global__ void bn_tanh_kernel(const float* __restrict__ z, const float* __restrict__ w,
                               const float* __restrict__ b, float* __restrict__ y, int rows,
                               int cols, float eps) {
    __shared__ float buf[THREADS];
    const int c = blockIdx.x;
    float s = 0.f;
    for (int r = threadIdx.x; r < rows; r += THREADS) s += z[(int64_t)r * cols + c];
    const float mean = block_sum(s, buf) / rows;
    float q = 0.f;
    for (int r = threadIdx.x; r < rows; r += THREADS) {
        const float d = z[(int64_t)r * cols + c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf) / rows + eps);
    for (int r = threadIdx.x; r < rows; r += THREADS) {
        const int64_t at = (int64_t)r * cols + c;
        y[at] = tanhf((z[at] - mean) * rstd * w[c] + b[c]);
    }
}

torch::Tensor bn_tanh_cuda(torch::Tensor z, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(z.is_cuda() && z.dim() == 2, "z must be a 2-D CUDA tensor");
    auto zc = z.contiguous();
    auto y = torch::empty_like(zc);
    bn_tanh_kernel<<<zc.size(1), THREADS>>>(zc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                            b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                            zc.size(0), zc.size(1), 1e-5f);
    return y;
}
"""

cpp_source = "torch::Tensor bn_tanh_cuda(torch::Tensor z, torch::Tensor w, torch::Tensor b);"

bn_tanh_ext = load_inline(
    name="bn_tanh_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["bn_tanh_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.randn(out_features))
        self.bias = nn.Parameter(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bn_tanh_ext.bn_tanh_cuda(self.linear(x), self.weight, self.bias)
