"""Typical CUDA answer to level2/11 (Linear without bias, / 2, sum over features, * scale): the sum
is taken first, sum_j (x W.T)_j = x . (sum_j W_j), so the GEMM becomes a column sum of W and a
matrix-vector product, both in small kernels."""

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

__global__ void column_sum_kernel(const float* __restrict__ W, float* __restrict__ s, int rows,
                                  int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float acc = 0.f;
    for (int r = 0; r < rows; ++r) acc += W[(int64_t)r * cols + c];
    s[c] = acc;
}

__global__ void scaled_matvec_kernel(const float* __restrict__ x, const float* __restrict__ s,
                                     float* __restrict__ y, int K, float factor) {
    __shared__ float buf[THREADS];
    const float* row = x + (int64_t)blockIdx.x * K;
    float acc = 0.f;
    for (int k = threadIdx.x; k < K; k += THREADS) acc += row[k] * s[k];
    acc = block_sum(acc, buf);
    if (threadIdx.x == 0) y[blockIdx.x] = acc * factor;
}

torch::Tensor sum_gemm_cuda(torch::Tensor x, torch::Tensor w, double scale) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shapes");
    auto X = x.contiguous();
    auto Wc = w.contiguous();
    const int M = X.size(0), K = X.size(1), N = Wc.size(0);
    auto s = torch::empty({K}, X.options());
    auto y = torch::empty({M, 1}, X.options());
    column_sum_kernel<<<(K + 255) / 256, 256>>>(Wc.data_ptr<float>(), s.data_ptr<float>(), N, K);
    scaled_matvec_kernel<<<M, THREADS>>>(X.data_ptr<float>(), s.data_ptr<float>(),
                                         y.data_ptr<float>(), K, (float)(scale / 2.0));
    return y;
}
"""

cpp_source = "torch::Tensor sum_gemm_cuda(torch::Tensor x, torch::Tensor w, double scale);"

sum_gemm_ext = load_inline(
    name="sum_gemm_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["sum_gemm_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features**0.5)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_gemm_ext.sum_gemm_cuda(x, self.weight, self.scale)
