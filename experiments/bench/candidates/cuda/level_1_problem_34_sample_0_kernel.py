"""Typical CUDA answer to level1/34 (max pool 3x3, stride 2, padding 1): one thread per output."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void max_pool_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes,
                                int H, int W, int OH, int OW) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= planes * OH * OW) return;
    const int ow = i % OW, oh = (i / OW) % OH;
    const float* p = x + (i / ((int64_t)OH * OW)) * H * W;
    float m = -FLT_MAX;
    for (int dy = 0; dy < 3; ++dy) {
        const int h = oh * 2 - 1 + dy;
        if (h < 0 || h >= H) continue;
        for (int dx = 0; dx < 3; ++dx) {
            const int w = ow * 2 - 1 + dx;
            if (w >= 0 && w < W) m = fmaxf(m, p[(int64_t)h * W + w]);
        }
    }
    y[i] = m;
}

torch::Tensor max_pool_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 4, "x must be a 4-D CUDA tensor");
    auto xc = x.contiguous();
    const int H = xc.size(2), W = xc.size(3);
    const int OH = (H + 2 - 3) / 2 + 1, OW = (W + 2 - 3) / 2 + 1;
    auto y = torch::empty({xc.size(0), xc.size(1), OH, OW}, xc.options());
    const int64_t planes = xc.size(0) * xc.size(1), n = planes * OH * OW;
    max_pool_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), planes, H, W,
                                              OH, OW);
    return y;
}
"""

cpp_source = "torch::Tensor max_pool_cuda(torch::Tensor x);"

max_pool_ext = load_inline(
    name="max_pool_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["max_pool_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return max_pool_ext.max_pool_cuda(x)
