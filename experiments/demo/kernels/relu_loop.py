import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>

torch::Tensor relu_cpu(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto x_c = x.contiguous();
    auto out = torch::empty_like(x_c);
    const float* px = x_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = x_c.numel();
    for (int64_t i = 0; i < n; ++i) {
        po[i] = px[i] > 0.0f ? px[i] : 0.0f;
    }
    return out;
}
"""

relu_ext = load_inline(
    name="demo_relu_v2",
    cpp_sources=relu_source,
    functions=["relu_cpu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """ReLU as one C++ loop over the elements (vectorised by the compiler at -O3)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cpu(x)
