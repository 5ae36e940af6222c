"""Typical CUDA answer to level1/30 (Conv2d, same padding, stride 1): one thread per output
element, a direct sum over input channels and the kernel window; nn.Conv2d kept for its
parameters."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                              const float* __restrict__ b, float* __restrict__ y, int N, int IC,
                              int OC, int H, int W, int K, int pad) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= (int64_t)N * OC * H * W) return;
    const int ow = i % W, oh = (i / W) % H, oc = (i / ((int64_t)W * H)) % OC;
    const int n = i / ((int64_t)W * H * OC);
    float acc = b[oc];
    for (int ic = 0; ic < IC; ++ic) {
        const float* xp = x + ((int64_t)n * IC + ic) * H * W;
        const float* wp = w + ((int64_t)oc * IC + ic) * K * K;
        for (int ky = 0; ky < K; ++ky) {
            const int h = oh - pad + ky;
            if (h < 0 || h >= H) continue;
            for (int kx = 0; kx < K; ++kx) {
                const int c = ow - pad + kx;
                if (c >= 0 && c < W) acc += xp[(int64_t)h * W + c] * wp[ky * K + kx];
            }
        }
    }
    y[i] = acc;
}

torch::Tensor conv2d_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4 && w.dim() == 4, "bad input");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int N = xc.size(0), IC = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int OC = wc.size(0), K = wc.size(2);
    auto y = torch::empty({N, OC, H, W}, xc.options());
    const int64_t n = (int64_t)N * OC * H * W;
    conv2d_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), wc.data_ptr<float>(),
                                            b.contiguous().data_ptr<float>(), y.data_ptr<float>(), N,
                                            IC, OC, H, W, K, K / 2);
    return y;
}
"""

cpp_source = "torch::Tensor conv2d_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

conv2d_ext = load_inline(
    name="conv2d_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv2d_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return conv2d_ext.conv2d_cuda(x, self.conv.weight, self.conv.bias)
