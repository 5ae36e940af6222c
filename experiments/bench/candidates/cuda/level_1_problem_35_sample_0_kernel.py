"""Typical CUDA answer to level1/35 (avg pool 3x3x3, stride 2, padding 1, padding counted):
one thread per output."""

import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

__global__ void avg_pool3d_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t planes,
                                  int D, int H, int W, int OD, int OH, int OW) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= planes * OD * OH * OW) return;
    const int ow = i % OW, oh = (i / OW) % OH, od = (i / ((int64_t)OW * OH)) % OD;
    const float* p = x + (i / ((int64_t)OD * OH * OW)) * D * H * W;
    float s = 0.f;
    for (int dz = 0; dz < 3; ++dz) {
        const int d = od * 2 - 1 + dz;
        if (d < 0 || d >= D) continue;
        for (int dy = 0; dy < 3; ++dy) {
            const int h = oh * 2 - 1 + dy;
            if (h < 0 || h >= H) continue;
            for (int dx = 0; dx < 3; ++dx) {
                const int w = ow * 2 - 1 + dx;
                if (w >= 0 && w < W) s += p[((int64_t)d * H + h) * W + w];
            }
        }
    }
    y[i] = s / 27.f;
}

torch::Tensor avg_pool3d_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 5, "x must be a 5-D CUDA tensor");
    auto xc = x.contiguous();
    const int D = xc.size(2), H = xc.size(3), W = xc.size(4);
    const int OD = (D - 1) / 2 + 1, OH = (H - 1) / 2 + 1, OW = (W - 1) / 2 + 1;
    auto y = torch::empty({xc.size(0), xc.size(1), OD, OH, OW}, xc.options());
    const int64_t planes = xc.size(0) * xc.size(1), n = planes * OD * OH * OW;
    avg_pool3d_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), planes, D,
                                                H, W, OD, OH, OW);
    return y;
}
"""

cpp_source = "torch::Tensor avg_pool3d_cuda(torch::Tensor x);"

avg_pool3d_ext = load_inline(
    name="avg_pool3d_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["avg_pool3d_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return avg_pool3d_ext.avg_pool3d_cuda(x)
