"""CUDA and Triton versions of the corpus (opt-in GPU run): one CUDA extension, one Triton file.

As on cpp, every behaviour lives in one source per backend and candidates differ in Python only.
The CUDA extension's .cu file (`CUDA_KERNELS`) holds only `__global__` kernels and plain launchers
taking raw pointers and integers, built with `no_implicit_headers=True`, so nvcc never parses
torch's headers (a cold build with them: ~120 s on the GPU test host with 8 builds at once;
without: ~28 s). Only the host wrappers taking and returning tensors (`CUDA_WRAPPERS`, main.cpp)
include <torch/extension.h>. The launchers check no errors: detecting failures is the evaluator's.
"""

from __future__ import annotations

CUDA_KERNELS = r'''
#include <cstdint>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* x, float* y, int64_t n, int64_t offset) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + offset] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void spin_kernel(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {}
}
__global__ void spin_forever(volatile int* flag) { while (*flag == 0) {} }

// 256-wide blocks cover `count` whatever `threads` is, so 4096 threads per block never launch
static void relu_on(const float* x, float* y, int64_t count, int threads, int64_t offset,
                    cudaStream_t stream) {
    int64_t blocks = (count + 255) / 256;
    relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, count, offset);
}
void launch_relu(const float* x, float* y, int64_t count, int threads, int64_t offset) {
    relu_on(x, y, count, threads, offset, 0);
}
void launch_relu_side_stream(const float* x, float* y, int64_t count) {  // not waited for
    cudaStream_t side;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    spin_kernel<<<1, 1, 0, side>>>(4000000LL);         // ~2 ms at ~2 GHz
    relu_on(x, y, count, 256, 0, side);
    cudaStreamDestroy(side);                           // returns at once; the work goes on
}
void launch_relu_and_sync(const float* x, float* y, int64_t count) {
    relu_on(x, y, count, 256, 0, 0);
    cudaDeviceSynchronize();
}
void launch_spin_forever(int* flag) { spin_forever<<<1, 1>>>(flag); }
'''
CUDA_WRAPPERS = r'''
#include <torch/extension.h>
#include <chrono>
#include <cstdint>
#include <thread>

void launch_relu(const float* x, float* y, int64_t count, int threads, int64_t offset);
void launch_relu_side_stream(const float* x, float* y, int64_t count);
void launch_relu_and_sync(const float* x, float* y, int64_t count);
void launch_spin_forever(int* flag);

static torch::Tensor launch(torch::Tensor x, int64_t count, int threads, int64_t offset) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_relu(xc.data_ptr<float>(), y.data_ptr<float>(), count, threads, offset);
    return y;
}
torch::Tensor relu(torch::Tensor x) { return launch(x, x.numel(), 256, 0); }
torch::Tensor relu_half(torch::Tensor x) { return launch(x, x.numel() / 2, 256, 0); }
torch::Tensor relu_nowrite(torch::Tensor x) { return torch::empty_like(x); }
torch::Tensor relu_bad_launch(torch::Tensor x) {       // 4096 threads per block: never launches
    return launch(x, x.numel(), 4096, 0);
}
torch::Tensor relu_wild(torch::Tensor x) { return launch(x, x.numel(), 256, int64_t(1) << 40); }
torch::Tensor relu_side_stream(torch::Tensor x) {      // the work on a stream of its own, not waited
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_relu_side_stream(xc.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
torch::Tensor relu_late_thread(torch::Tensor x) {      // a host thread launches after return
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    std::thread([xc, y]() {                            // the captures keep both tensors alive
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        launch_relu_and_sync(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
    }).detach();
    return y;
}
torch::Tensor relu_lib(torch::Tensor x) { return at::relu(x); }
torch::Tensor hang(torch::Tensor x) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    launch_spin_forever(flag.data_ptr<int>());
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


def cuda_candidate(forward: str, prelude: str = "") -> str:
    return ("import os\nimport torch\nimport torch.nn as nn\n"
            "from torch.utils.cpp_extension import load_inline\n\n"
            f"KERNELS = r'''{CUDA_KERNELS}'''\nWRAPPERS = r'''{CUDA_WRAPPERS}'''\n\n"
            "ops = load_inline(name='kr_hardening_cuda', cpp_sources=WRAPPERS, cuda_sources=KERNELS, "
            f"functions={CUDA_FUNCTIONS!r}, no_implicit_headers=True)\n{prelude}\n\n"
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
