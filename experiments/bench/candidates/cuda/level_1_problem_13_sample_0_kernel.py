"""Typical CUDA answer to level1/13 (max over the last dim): one block per row, a tree max."""

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

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    __shared__ float buf[THREADS];
    const float* row = x + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) m = fmaxf(m, row[c]);
    m = block_max(m, buf);
    if (threadIdx.x == 0) y[blockIdx.x] = m;
}

torch::Tensor row_max_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3, "x must be a 3-D CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0), xc.size(1)}, xc.options());
    row_max_kernel<<<xc.size(0) * xc.size(1), THREADS>>>(xc.data_ptr<float>(), y.data_ptr<float>(),
                                                       xc.size(2));
    return y;
}
"""

cpp_source = "torch::Tensor row_max_cuda(torch::Tensor x);"

row_max_ext = load_inline(
    name="row_max_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["row_max_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_max_ext.row_max_cuda(x)
