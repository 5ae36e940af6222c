"""Typical CUDA answer to level1/36 (per-sample cross-entropy): one block per row, a log-sum-exp
minus the target logit."""

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

__global__ void cross_entropy_kernel(const float* __restrict__ logits, const int64_t* __restrict__ t,
                                     float* __restrict__ loss, int classes) {
    __shared__ float buf[THREADS];
    const float* row = logits + (int64_t)blockIdx.x * classes;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < classes; c += THREADS) m = fmaxf(m, row[c]);
    m = block_max(m, buf);
    float s = 0.f;
    for (int c = threadIdx.x; c < classes; c += THREADS) s += expf(row[c] - m);
    s = block_sum(s, buf);
    if (threadIdx.x == 0) loss[blockIdx.x] = m + logf(s) - row[t[blockIdx.x]];
}

torch::Tensor cross_entropy_cuda(torch::Tensor logits, torch::Tensor targets) {
    TORCH_CHECK(logits.is_cuda() && logits.dim() == 2, "logits must be a 2-D CUDA tensor");
    auto L = logits.contiguous();
    auto T = targets.contiguous().to(torch::kLong);
    auto loss = torch::empty({L.size(0)}, L.options());
    cross_entropy_kernel<<<L.size(0), THREADS>>>(L.data_ptr<float>(), T.data_ptr<int64_t>(),
                                                 loss.data_ptr<float>(), L.size(1));
    return loss;
}
"""

cpp_source = "torch::Tensor cross_entropy_cuda(torch::Tensor logits, torch::Tensor targets);"

cross_entropy_ext = load_inline(
    name="cross_entropy_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["cross_entropy_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cross_entropy_ext.cross_entropy_cuda(logits, targets)
