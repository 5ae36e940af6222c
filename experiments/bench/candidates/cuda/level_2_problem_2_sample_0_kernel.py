"""Typical CUDA answer to level2/2 (Linear, then z + sigmoid(z) * scale): one tiled GEMM with the
sigmoid, scale and residual fused into its epilogue; nn.Linear kept for its parameters."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

#define TILE 32

// y = epilogue(x @ W.T + b): x [M, K], W [N, K] (nn.Linear's layout), 32x32 shared-memory tiles.
__global__ void gemm_sigmoid_residual_kernel(const float* __restrict__ X, const float* __restrict__ Wt,
                            const float* __restrict__ bias, float scale, float* __restrict__ Y,
                            int M, int K, int N) {
    __shared__ float Xs[TILE][TILE];
    __shared__ float Ws[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int wrow = blockIdx.x * TILE + threadIdx.y;  // the W row this thread loads
    float acc = 0.f;
    for (int t = 0; t < K; t += TILE) {
        Xs[threadIdx.y][threadIdx.x] = (row < M && t + threadIdx.x < K)
            ? X[(int64_t)row * K + t + threadIdx.x] : 0.f;
        Ws[threadIdx.x][threadIdx.y] = (wrow < N && t + threadIdx.x < K)
            ? Wt[(int64_t)wrow * K + t + threadIdx.x] : 0.f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) acc += Xs[threadIdx.y][i] * Ws[i][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {
        const float z = acc + bias[col];
        Y[(int64_t)row * N + col] = z + scale / (1.f + expf(-z));
    }
}

torch::Tensor gemm_sigmoid_residual_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1), "shapes");
    auto X = x.contiguous();
    auto Wc = w.contiguous();
    const int M = X.size(0), K = X.size(1), N = Wc.size(0);
    auto Y = torch::empty({M, N}, X.options());
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_sigmoid_residual_kernel<<<grid, block>>>(X.data_ptr<float>(), Wc.data_ptr<float>(),
                                 b.contiguous().data_ptr<float>(), (float)scale, Y.data_ptr<float>(),
                                 M, K, N);
    return Y;
}
"""

cpp_source = "torch::Tensor gemm_sigmoid_residual_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double scale);"

gemm_sigmoid_residual_ext = load_inline(
    name="gemm_sigmoid_residual_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_sigmoid_residual_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_sigmoid_residual_ext.gemm_sigmoid_residual_cuda(
            x, self.linear.weight, self.linear.bias, self.scale)
