"""Typical CUDA answer to level2/6 (Conv2d, ReLU, per-channel bias): the convolution stays in
cuDNN; one elementwise kernel fuses the ReLU and the bias add."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void relu_bias_kernel(const float* __restrict__ z, const float* __restrict__ bias,
                                 float* __restrict__ y, int64_t n, int64_t C, int64_t HW) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaxf(z[i], 0.f) + bias[(i / HW) % C];
    }
}

torch::Tensor relu_bias_cuda(torch::Tensor z, torch::Tensor bias) {
    TORCH_CHECK(z.is_cuda() && z.dim() == 4 && bias.numel() == z.size(1), "bad input");
    auto zc = z.contiguous();
    auto y = torch::empty_like(zc);
    const int64_t n = zc.numel();
    const int blocks = (int)std::min<int64_t>((n + 255) / 256, 1 << 20);
    relu_bias_kernel<<<blocks, 256>>>(zc.data_ptr<float>(), bias.contiguous().data_ptr<float>(),
                                      y.data_ptr<float>(), n, zc.size(1), zc.size(2) * zc.size(3));
    return y;
}
"""

cpp_source = "torch::Tensor relu_bias_cuda(torch::Tensor z, torch::Tensor bias);"

relu_bias_ext = load_inline(
    name="relu_bias_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_bias_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel)
        self.bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_bias_ext.relu_bias_cuda(self.conv(x), self.bias)
