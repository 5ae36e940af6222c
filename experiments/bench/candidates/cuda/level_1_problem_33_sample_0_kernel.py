"""Typical CUDA answer to level1/33 (depthwise Conv2d, same padding): one thread per output
element over its channel's window; nn.Conv2d kept for its parameters."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void depthwise_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int64_t planes,
                                 int C, int H, int W, int K, int pad) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= planes * H * W) return;
    const int ow = i % W, oh = (i / W) % H;
    const int64_t plane = i / ((int64_t)H * W);
    const int c = plane % C;
    const float* xp = x + plane * H * W;
    const float* wp = w + (int64_t)c * K * K;
    float acc = b[c];
    for (int ky = 0; ky < K; ++ky) {
        const int h = oh - pad + ky;
        if (h < 0 || h >= H) continue;
        for (int kx = 0; kx < K; ++kx) {
            const int col = ow - pad + kx;
            if (col >= 0 && col < W) acc += xp[(int64_t)h * W + col] * wp[ky * K + kx];
        }
    }
    y[i] = acc;
}

torch::Tensor depthwise_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4 && w.size(0) == x.size(1), "bad input");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int C = xc.size(1), H = xc.size(2), W = xc.size(3), K = wc.size(2);
    auto y = torch::empty_like(xc);
    const int64_t planes = xc.size(0) * C, n = planes * H * W;
    depthwise_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                               b.contiguous().data_ptr<float>(), y.data_ptr<float>(),
                                               planes, C, H, W, K, K / 2);
    return y;
}
"""

cpp_source = "torch::Tensor depthwise_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

depthwise_ext = load_inline(
    name="depthwise_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["depthwise_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel, padding=kernel // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return depthwise_ext.depthwise_cuda(x, self.conv.weight, self.conv.bias)
