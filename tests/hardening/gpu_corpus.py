"""CUDA and Triton versions of the corpus (opt-in GPU run): one CUDA extension, one Triton file.

As on cpp, every behaviour lives in one source per backend and candidates differ in Python only.
"""

from __future__ import annotations

OPS_CUDA = r'''
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <chrono>

__global__ void relu_kernel(const float* x, float* y, int64_t n, int64_t offset) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + offset] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
__global__ void spin_forever(volatile int* flag) { while (*flag == 0) {} }

static torch::Tensor launch(torch::Tensor x, int64_t count, int threads, int64_t offset,
                            cudaStream_t stream) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t blocks = (count + 255) / 256;
    relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(),
                                                          count, offset);
    return y;
}
torch::Tensor relu(torch::Tensor x) { return launch(x, x.numel(), 256, 0, 0); }
torch::Tensor relu_half(torch::Tensor x) { return launch(x, x.numel() / 2, 256, 0, 0); }
torch::Tensor relu_nowrite(torch::Tensor x) { return torch::empty_like(x); }
torch::Tensor relu_bad_launch(torch::Tensor x) {       // 4096 threads per block: never launches
    return launch(x, x.numel(), 4096, 0, 0);
}
torch::Tensor relu_wild(torch::Tensor x) { return launch(x, x.numel(), 256, int64_t(1) << 40, 0); }
torch::Tensor relu_side_stream(torch::Tensor x) {      // the work on a stream of its own, not waited
    cudaStream_t side;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    spin_kernel<<<1, 1, 0, side>>>(4000000LL);         // ~2 ms at ~2 GHz
    auto y = launch(x, x.numel(), 256, 0, side);
    cudaStreamDestroy(side);                           // returns at once; the work goes on
    return y;
}
torch::Tensor relu_late_thread(torch::Tensor x) {      // a host thread launches after return
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    std::thread([xc, y]() {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        int64_t n = xc.numel();
        relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n, 0);
        cudaDeviceSynchronize();
    }).detach();
    return y;
}
torch::Tensor relu_lib(torch::Tensor x) { return at::relu(x); }
torch::Tensor hang(torch::Tensor x) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    spin_forever<<<1, 1>>>(flag.data_ptr<int>());
    return x;
}
torch::Tensor crash(torch::Tensor x) {
    volatile float* p = reinterpret_cast<float*>(static_cast<uintptr_t>(x.size(0) >> 62));
    *p = 1.f;
    return x;
}
'''
CUDA_FUNCTIONS = ["relu", "relu_half", "relu_nowrite", "relu_bad_launch", "relu_wild",
                  "relu_side_stream", "relu_late_thread", "relu_lib", "hang", "crash"]
CUDA_DECLS = "\n".join(f"torch::Tensor {f}(torch::Tensor x);" for f in CUDA_FUNCTIONS)


def cuda_candidate(forward: str, prelude: str = "") -> str:
    return ("import os\nimport torch\nimport torch.nn as nn\n"
            "from torch.utils.cpp_extension import load_inline\n\n"
            f"SOURCE = r'''{OPS_CUDA}'''\n\n"
            f"ops = load_inline(name='kr_hardening_cuda', cpp_sources={CUDA_DECLS!r}, "
            f"cuda_sources=SOURCE, functions={CUDA_FUNCTIONS!r})\n{prelude}\n\n"
            "class ModelNew(nn.Module):\n"
            "    def forward(self, x):\n"
            + "".join(f"        {line}\n" for line in forward.strip().splitlines()))


TRITON = '''\
import os
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs + offset, tl.where(x > 0, x, 0.0), mask=mask)


def launch(x, count, offset=0):
    x = x.contiguous()
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(count, 1024),)](x, y, count, offset, BLOCK=1024)
    return y
'''


def triton_candidate(forward: str) -> str:
    return (TRITON + "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
            + "".join(f"        {line}\n" for line in forward.strip().splitlines()))
