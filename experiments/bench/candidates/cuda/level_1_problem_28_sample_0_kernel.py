"""Typical CUDA answer to level1/28 (GroupNorm): one block per (sample, group), mean and variance
over the group's channels and pixels, then the per-channel affine step."""

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

__global__ void group_norm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                  const float* __restrict__ b, float* __restrict__ y, int64_t G,
                                  int64_t Cg, int64_t HW, float eps) {
    __shared__ float buf[THREADS];
    const int64_t count = Cg * HW;
    const int64_t base = (int64_t)blockIdx.x * count;  // (n, g) blocks are contiguous in NCHW
    const int64_t g = blockIdx.x % G;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) s += x[base + i];
    const float mean = block_sum(s, buf) / (float)count;
    float q = 0.f;
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const float d = x[base + i] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf) / (float)count + eps);
    for (int64_t i = threadIdx.x; i < count; i += THREADS) {
        const int64_t c = g * Cg + i / HW;
        y[base + i] = (x[base + i] - mean) * rstd * w[c] + b[c];
    }
}

torch::Tensor group_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t groups,
                              double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4 && x.size(1) % groups == 0, "bad input");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t N = xc.size(0), C = xc.size(1), HW = xc.size(2) * xc.size(3);
    group_norm_kernel<<<N * groups, THREADS>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                               b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                               groups, C / groups, HW, (float)eps);
    return y;
}
"""

cpp_source = "torch::Tensor group_norm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, int64_t groups, double eps);"

group_norm_ext = load_inline(
    name="group_norm_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["group_norm_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.5)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return group_norm_ext.group_norm_cuda(x, self.norm.weight, self.norm.bias, self.norm.num_groups,
                                             self.norm.eps)
