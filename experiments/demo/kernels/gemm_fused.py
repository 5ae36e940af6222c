import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = r"""
#include <torch/extension.h>

// y = relu(x @ w.T + bias) in one pass: x [batch, in], w [out, in] (nn.Linear's layout), bias [out].
// Each output is a dot product of two contiguous rows, so the inner loop vectorises.
torch::Tensor gemm_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1),
                "x must be [batch, in] and w [out, in]");
    TORCH_CHECK(bias.numel() == w.size(0), "bias must have one value per output");
    auto x_c = x.contiguous();
    auto w_c = w.contiguous();
    auto b_c = bias.contiguous();
    const int64_t batch = x_c.size(0), in = x_c.size(1), out = w_c.size(0);
    auto y = torch::empty({batch, out}, x_c.options());
    const float* __restrict__ px = x_c.data_ptr<float>();
    const float* __restrict__ pw = w_c.data_ptr<float>();
    const float* __restrict__ pb = b_c.data_ptr<float>();
    float* __restrict__ py = y.data_ptr<float>();
    for (int64_t i = 0; i < batch; ++i) {
        const float* x_row = px + i * in;
        for (int64_t j = 0; j < out; ++j) {
            const float* w_row = pw + j * in;
            float sum = 0.0f;
            for (int64_t p = 0; p < in; ++p) {
                sum += x_row[p] * w_row[p];
            }
            sum += pb[j];
            py[i * out + j] = sum > 0.0f ? sum : 0.0f;
        }
    }
    return y;
}
"""

fused_ext = load_inline(
    name="demo_gemm_bias_relu",
    cpp_sources=fused_source,
    functions=["gemm_bias_relu"],
    extra_cflags=["-O3", "-march=native", "-ffast-math"],
    verbose=False,
)


class ModelNew(nn.Module):
    """GEMM, both biases and ReLU fused into one C++ kernel; the two bias vectors are summed first."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(0.1 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fused_ext.gemm_bias_relu(x, self.linear.weight, self.linear.bias + self.bias)
