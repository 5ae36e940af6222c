"""Candidate sources for the evaluator tests, built from as few C++/CUDA extensions as possible.

Builds are the slow part (45 s for C++, 77 s for CUDA here), and the build cache shares an
extension directory between candidates whose extension sources are identical (feedback/cache.py).
So every behaviour lives in ONE extension per backend, `OPS_CPP` / `CUDA_KERNELS`, exposing one function
per behaviour, and the candidates differ only in which function their Python `forward` calls.
"""

from __future__ import annotations

HEADER = """\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
"""

OPS_CPP = r'''
#include <torch/extension.h>
#include <cstdint>
#include <cstdlib>

static torch::Tensor map(torch::Tensor x, float negative_slope) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) out[i] = in[i] > 0.f ? in[i] : negative_slope * in[i];
    return y;
}
torch::Tensor relu(torch::Tensor x) { return map(x, 0.f); }
torch::Tensor relu_wrong(torch::Tensor x) { return map(x, 0.1f); }
torch::Tensor relu_flat(torch::Tensor x) { return map(x, 0.f).reshape({-1}); }
torch::Tensor crash(torch::Tensor x) {
    volatile float* p = reinterpret_cast<float*>(static_cast<uintptr_t>(x.size(0) >> 62));
    *p = 1.f;  // address 0: SIGSEGV
    return x;
}
torch::Tensor hang(torch::Tensor x) { volatile bool go = true; while (go) {} return x; }
torch::Tensor leave(torch::Tensor x) { std::exit(0); return x; }
torch::Tensor hog(torch::Tensor x) { return torch::ones({int64_t(3) << 28}, x.options()); }  // 3 GiB
'''
CPP_FUNCTIONS = ["relu", "relu_wrong", "relu_flat", "crash", "hang", "leave", "hog"]

BROKEN_CPP = r'''
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) {
    return undefined_function(x);
}
'''


def cpp_candidate(call: str = "relu", source: str = OPS_CPP, functions: list[str] | None = None,
                  extra: str = "") -> str:
    """A cpp candidate whose forward returns `ops.<call>(x)`; `extra` is appended (Python only)."""
    functions = functions or (CPP_FUNCTIONS if source is OPS_CPP else ["relu"])
    return (HEADER + f"\nSOURCE = r'''{source}'''\n\n"
            f"ops = load_inline(name='kr_test_ops', cpp_sources=SOURCE, functions={functions!r}, "
            "extra_cflags=['-O1'])\n\n\n"
            "class ModelNew(nn.Module):\n"
            "    def forward(self, x):\n"
            f"        return ops.{call}(x)\n{extra}")


# The CUDA file holds only kernels and plain launchers (`no_implicit_headers=True`), so nvcc never
# parses torch's headers: only the host wrappers (main.cpp) pay for <torch/extension.h>.
CUDA_KERNELS = r'''
#include <cstdint>
#include <cuda_runtime.h>

__global__ void map_kernel(const float* x, float* y, int64_t n, float slope, int64_t offset) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i + offset] = x[i] > 0.f ? x[i] : slope * x[i];
}
__global__ void spin_kernel(volatile int* flag) { while (*flag == 0) {} }

void launch_map(const float* x, float* y, int64_t n, float slope, int64_t offset) {
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    map_kernel<<<blocks, threads>>>(x, y, n, slope, offset);
}
void launch_spin(int* flag) { spin_kernel<<<1, 1>>>(flag); }
'''
CUDA_WRAPPERS = r'''
#include <torch/extension.h>
#include <cstdlib>

void launch_map(const float* x, float* y, int64_t n, float slope, int64_t offset);
void launch_spin(int* flag);

static torch::Tensor map(torch::Tensor x, float slope, int64_t offset) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    launch_map(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), slope, offset);
    return y;
}
torch::Tensor relu(torch::Tensor x) { return map(x, 0.f, 0); }
torch::Tensor relu_wrong(torch::Tensor x) { return map(x, 0.1f, 0); }
torch::Tensor relu_flat(torch::Tensor x) { return map(x, 0.f, 0).reshape({-1}); }
torch::Tensor wild(torch::Tensor x) { return map(x, 0.f, int64_t(1) << 40); }  // illegal address
torch::Tensor hang(torch::Tensor x) {
    auto flag = torch::zeros({1}, x.options().dtype(torch::kInt32));
    launch_spin(flag.data_ptr<int>());
    return x;
}
torch::Tensor leave(torch::Tensor x) { std::exit(0); return x; }
'''
CUDA_FUNCTIONS = ["relu", "relu_wrong", "relu_flat", "wild", "hang", "leave"]

# A compile error in the kernel file; the host side is a one-liner, so the build fails in seconds.
BROKEN_CUDA = r'''
#include <cstdint>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : undefined_value;
}
'''


def cuda_candidate(call: str = "relu", source: str = CUDA_KERNELS, extra: str = "") -> str:
    """A cuda candidate whose forward returns `ops.<call>(x)` (`source=BROKEN_CUDA`: no build)."""
    if source is CUDA_KERNELS:
        build = "cpp_sources=WRAPPERS, cuda_sources=KERNELS, functions=" + repr(CUDA_FUNCTIONS)
        wrappers = CUDA_WRAPPERS
    else:
        build, wrappers = "cpp_sources=WRAPPERS, cuda_sources=KERNELS", "int placeholder = 0;"
    return (HEADER + f"\nKERNELS = r'''{source}'''\nWRAPPERS = r'''{wrappers}'''\n\n"
            f"ops = load_inline(name='kr_test_cuda_ops', {build}, no_implicit_headers=True)\n\n\n"
            "class ModelNew(nn.Module):\n"
            "    def forward(self, x):\n"
            f"        return ops.{call}(x)\n{extra}")


TRITON_CANDIDATE = '''\
import os
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, slope, offset, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs + offset, tl.where(x > 0, x, slope * x), mask=mask)


@triton.jit
def spin_kernel(flag_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:
        pass


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BODY
'''
TRITON_BODIES = {
    "relu": "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, 0.0, 0, BLOCK=1024)\n        return y",
    "relu_wrong": "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, 0.1, 0, BLOCK=1024)\n        return y",
    "relu_flat": "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, 0.0, 0, BLOCK=1024)\n"
                 "        return y.reshape(-1)",
    "broken": "relu_kernel[(triton.cdiv(n, 1000),)](x, y, n, 0.0, 0, BLOCK=1000)\n        return y",
    "wild": "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, 0.0, 1 << 40, BLOCK=1024)\n        return y",
    "hang": "spin_kernel[(1,)](torch.zeros(1, dtype=torch.int32, device=x.device))\n        return y",
    "leave": "os._exit(0)",
}


def triton_candidate(call: str = "relu") -> str:
    """A triton candidate; `broken` fails to compile (a block size that is not a power of 2)."""
    return TRITON_CANDIDATE.replace("BODY", TRITON_BODIES[call])


def deterministic(r) -> dict:
    """The fields of an EvalResult that depend neither on random inputs nor on timing: what two
    executors (local, Ray) must agree on for the same candidate."""
    c, env = r.correctness, r.environment
    return {"status": r.status, "stage": r.stage, "backend": r.backend, "problem": r.problem_id,
            "code": r.code_hash, "size": r.size,
            "message": r.message if r.status.value == "compile_error" else None,
            "trials": (c.trials, c.trials_passed) if c else None,
            "device": env.device if env else None, "host": env.hostname if env else None,
            "timed": (r.runtime is not None, r.speedup_eager is not None)}
