"""Typical CUDA answer to level1/9 (matmul with a very long K: split-K, 32x32 tiles per K chunk, atomicAdd)."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

#define TILE 32

__global__ void split_k_matmul_kernel(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int N, int K, int M, int chunk) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    const int k_begin = blockIdx.z * chunk, k_end = min(K, k_begin + chunk);
    float acc = 0.f;
    for (int t = k_begin; t < k_end; t += TILE) {
        const int ka = t + threadIdx.x;
        const int kb = t + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < N && ka < k_end) ? A[(int64_t)row * K + ka] : 0.f;
        Bs[threadIdx.y][threadIdx.x] = (kb < k_end && col < M) ? B[(int64_t)kb * M + col] : 0.f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TILE; ++i) acc += As[threadIdx.y][i] * Bs[i][threadIdx.x];
        __syncthreads();
    }
    if (row < N && col < M) atomicAdd(&C[(int64_t)row * M + col], acc);
}

torch::Tensor split_k_matmul_cuda(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    auto A = a.contiguous();
    auto B = b.contiguous();
    const int N = A.size(0), K = A.size(1), M = B.size(1);
    TORCH_CHECK(B.size(0) == K, "inner dimensions differ");
    auto C = torch::zeros({N, M}, A.options());
    const int chunk = 4096;
    const int splits = (K + chunk - 1) / chunk;
    dim3 block(TILE, TILE);
    dim3 grid((M + TILE - 1) / TILE, (N + TILE - 1) / TILE, splits);
    split_k_matmul_kernel<<<grid, block>>>(A.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(),
                                  N, K, M, chunk);
    return C;
}
"""

cpp_source = "torch::Tensor split_k_matmul_cuda(torch::Tensor a, torch::Tensor b);"

split_k_matmul_ext = load_inline(
    name="split_k_matmul_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["split_k_matmul_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return split_k_matmul_ext.split_k_matmul_cuda(A, B)
