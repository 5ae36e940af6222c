"""Typical CUDA answer to level1/37 (smooth L1, beta 1, averaged per sample): one block per row."""

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

__global__ void smooth_l1_kernel(const float* __restrict__ p, const float* __restrict__ t,
                                 float* __restrict__ out, int cols) {
    __shared__ float buf[THREADS];
    const float* pr = p + (int64_t)blockIdx.x * cols;
    const float* tr = t + (int64_t)blockIdx.x * cols;
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        const float d = fabsf(pr[c] - tr[c]);
        s += d < 1.f ? 0.5f * d * d : d - 0.5f;
    }
    s = block_sum(s, buf);
    if (threadIdx.x == 0) out[blockIdx.x] = s / cols;
}

torch::Tensor smooth_l1_cuda(torch::Tensor p, torch::Tensor t) {
    TORCH_CHECK(p.is_cuda() && p.dim() == 2 && p.sizes() == t.sizes(), "2-D CUDA tensors of one shape");
    auto P = p.contiguous();
    auto T = t.contiguous();
    auto out = torch::empty({P.size(0)}, P.options());
    smooth_l1_kernel<<<P.size(0), THREADS>>>(P.data_ptr<float>(), T.data_ptr<float>(),
                                             out.data_ptr<float>(), P.size(1));
    return out;
}
"""

cpp_source = "torch::Tensor smooth_l1_cuda(torch::Tensor p, torch::Tensor t);"

smooth_l1_ext = load_inline(
    name="smooth_l1_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["smooth_l1_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return smooth_l1_ext.smooth_l1_cuda(predictions, targets)
