"""Typical CUDA answer to level1/29 (Conv1d, no padding, stride 1): one thread per output
element, a direct sum over input channels and taps; nn.Conv1d kept for its parameters."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void conv1d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ b, float* __restrict__ y, int N, int IC,
                              int OC, int L, int K, int OL) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)N * OC * OL) return;
    const int l = i % OL, oc = (i / OL) % OC, n = i / ((int64_t)OL * OC);
    float acc = b[oc];
    for (int ic = 0; ic < IC; ++ic) {
        const float* xr = x + ((int64_t)n * IC + ic) * L + l;
        const float* wr = w + ((int64_t)oc * IC + ic) * K;
        for (int k = 0; k < K; ++k) acc += xr[k] * wr[k];
    }
    y[i] = acc;
}

torch::Tensor conv1d_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 3 && w.dim() == 3, "bad input");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int N = xc.size(0), IC = xc.size(1), L = xc.size(2), OC = wc.size(0), K = wc.size(2);
    const int OL = L - K + 1;
    auto y = torch::empty({N, OC, OL}, xc.options());
    const int64_t n = (int64_t)N * OC * OL;
    conv1d_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                            b.contiguous().data_ptr<float>(), y.data_ptr<float>(), N,
                                            IC, OC, L, K, OL);
    return y;
}
"""

cpp_source = "torch::Tensor conv1d_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

conv1d_ext = load_inline(
    name="conv1d_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv1d_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv1d_ext.conv1d_cuda(x, self.conv.weight, self.conv.bias)
