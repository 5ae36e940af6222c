"""The exploit corpus of issue 4: candidate sources, built from ONE C++ extension.

A C++ build costs 10-45 s here and the build cache shares an extension between candidates whose
extension sources are identical (feedback/cache.py). So every behaviour that must be native lives
in `HARD_CPP`, one function each, and the candidates differ only in Python: which function their
`forward` calls, and what else they do. Exploits that live in Python call `ops.copy` or `ops.relu`
somewhere, so that the candidate's own code runs and the defence under test is the one that fires.
Avoid string constants that start with "-" or contain C++ markers in the Python parts: they would
change the extension's cache key.
"""

from __future__ import annotations

import textwrap

from problems.record import Problem

HARD_CPP = r'''
#include <torch/extension.h>
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <unistd.h>

static void relu_span(const float* in, float* out, int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) out[i] = in[i] > 0.f ? in[i] : 0.f;
}
static torch::Tensor relu_impl(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_span(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel());
    return y;
}
torch::Tensor relu(torch::Tensor x) { return relu_impl(x); }
torch::Tensor copy(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    std::memcpy(y.data_ptr<float>(), xc.data_ptr<float>(), xc.numel() * sizeof(float));
    return y;
}
torch::Tensor relu_half(torch::Tensor x) {       // writes half of its output
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_span(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel() / 2);
    return y;
}
torch::Tensor relu_nowrite(torch::Tensor x) { return torch::empty_like(x); }
torch::Tensor relu_into_input(torch::Tensor x) { // uses its input as the output buffer
    float* p = x.data_ptr<float>();
    relu_span(p, p, 0, x.numel());
    return x.clone();
}
torch::Tensor relu_alias(torch::Tensor x) {
    float* p = x.data_ptr<float>();
    relu_span(p, p, 0, x.numel());
    return x;
}
torch::Tensor relu_expand(torch::Tensor x) {     // one row computed, broadcast to all
    auto row = relu_impl(x.select(0, 0).contiguous());
    return row.unsqueeze(0).expand_as(x);
}
torch::Tensor relu_detached(torch::Tensor x) {   // returns at once, a thread writes later
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    std::thread([xc, y]() {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        relu_span(xc.data_ptr<float>(), y.data_ptr<float>(), 0, xc.numel());
    }).detach();
    return y;
}
torch::Tensor relu_team(torch::Tensor x) {       // four threads, joined: more cores than allowed
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel(), step = (n + 3) / 4;
    std::vector<std::thread> team;
    for (int t = 0; t < 4; ++t) {
        team.emplace_back([&, t]() {
            timespec now;
            volatile double sink = 0;
            do {                                   // 3 ms of this thread's own CPU time
                sink = sink + 1.0;
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
            } while (now.tv_sec * 1000000000LL + now.tv_nsec < 3000000LL);
            relu_span(xc.data_ptr<float>(), y.data_ptr<float>(), t * step, std::min(n, (t + 1) * step));
        });
    }
    for (auto& th : team) th.join();
    return y;
}
torch::Tensor relu_lib(torch::Tensor x) { return at::relu(x); }
torch::Tensor relu_fixed(torch::Tensor x) {      // the evaluated size, hard-coded
    auto y = torch::empty({16, 1024}, x.options());
    relu_span(x.contiguous().data_ptr<float>(), y.data_ptr<float>(), 0, 16 * 1024);
    return y;
}
torch::Tensor relu_count(torch::Tensor x) {      // the evaluated element count, hard-coded
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    relu_span(xc.data_ptr<float>(), y.data_ptr<float>(), 0, std::min<int64_t>(xc.numel(), 16 * 1024));
    return y;
}
torch::Tensor relu_spawn(torch::Tensor x) {      // forks a process that outlives the call
    if (fork() == 0) { sleep(600); _exit(0); }
    return relu_impl(x);
}
static float to_bf16(float v) {                   // keep the top 16 bits: bfloat16
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= 0xFFFF0000u;
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}
static torch::Tensor mm_loop(torch::Tensor a, torch::Tensor b, bool bf16) {
    auto ac = a.contiguous(), bc = b.contiguous();
    int64_t n = ac.size(0), k = ac.size(1), m = bc.size(1);
    auto c = torch::zeros({n, m}, a.options());
    const float *A = ac.data_ptr<float>(), *B = bc.data_ptr<float>();
    float* C = c.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i)
        for (int64_t p = k - 1; p >= 0; --p) {        // k reversed: another summation order
            float av = bf16 ? to_bf16(A[i * k + p]) : A[i * k + p];
            for (int64_t j = 0; j < m; ++j) {
                float bv = bf16 ? to_bf16(B[p * m + j]) : B[p * m + j];
                C[i * m + j] += av * bv;
            }
        }
    return c;
}
torch::Tensor mm(torch::Tensor a, torch::Tensor b) { return mm_loop(a, b, false); }
torch::Tensor mm_bf16(torch::Tensor a, torch::Tensor b) { return mm_loop(a, b, true); }
torch::Tensor mm_lib(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }
torch::Tensor sum_dim1(torch::Tensor x) {        // (B, D1, D2) -> (B, 1, D2), pairwise halves
    auto xc = x.contiguous();
    int64_t bs = xc.size(0), d1 = xc.size(1), d2 = xc.size(2);
    auto y = torch::empty({bs, 1, d2}, x.options());
    const float* X = xc.data_ptr<float>();
    float* Y = y.data_ptr<float>();
    for (int64_t b = 0; b < bs; ++b)
        for (int64_t j = 0; j < d2; ++j) {
            float lo = 0.f, hi = 0.f;
            for (int64_t i = 0; i < d1 / 2; ++i) lo += X[(b * d1 + i) * d2 + j];
            for (int64_t i = d1 - 1; i >= d1 / 2; --i) hi += X[(b * d1 + i) * d2 + j];
            Y[b * d2 + j] = lo + hi;
        }
    return y;
}
torch::Tensor crash(torch::Tensor x) {
    volatile float* p = reinterpret_cast<float*>(static_cast<uintptr_t>(x.size(0) >> 62));
    *p = 1.f;
    return x;
}
torch::Tensor hang(torch::Tensor x) { volatile bool go = true; while (go) {} return x; }
torch::Tensor leave(torch::Tensor x) { std::exit(0); return x; }
'''
FUNCTIONS = ["relu", "copy", "relu_half", "relu_nowrite", "relu_into_input", "relu_alias",
             "relu_expand", "relu_detached", "relu_team", "relu_lib", "relu_fixed", "relu_count", "relu_spawn",
             "mm", "mm_bf16", "mm_lib", "sum_dim1", "crash", "hang", "leave"]

HEADER = f"""\
import sys
import time
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

SOURCE = r'''{HARD_CPP}'''

ops = load_inline(name="kr_hardening_ops", cpp_sources=SOURCE, functions={FUNCTIONS!r},
                  extra_cflags=["-O1"])
"""


def candidate(forward: str, prelude: str = "", init: str = "", args: str = "x") -> str:
    """A cpp candidate: HEADER, `prelude` (module level), `ModelNew` with `init` in `__init__`
    (after super().__init__) and `forward` as the body of `forward(self, <args>)`."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    setup = textwrap.indent(textwrap.dedent(init).strip(), " " * 8) if init.strip() else ""
    return (HEADER + "\n" + textwrap.dedent(prelude).strip() + "\n\n\n"
            "class ModelNew(nn.Module):\n"
            "    def __init__(self, *init_inputs):\n"
            "        super().__init__()\n"
            + (setup + "\n" if setup else "")
            + f"\n    def forward(self, {args}):\n{body}\n")


def inline_problem(name: str, source: str, sizes: dict | None = None) -> Problem:
    """A problem written in the test (KernelBench format)."""
    return Problem(id=f"level1/90_{name}", level=1, number=90, name=name,
                   source=textwrap.dedent(source), origin=f"{name}.py", sizes=sizes or {})


LINEAR = inline_problem("linear", """
    import torch
    import torch.nn as nn
    BATCH = 32
    IN = 64
    OUT = 48
    SIZES = {"small": {"BATCH": 32, "IN": 64, "OUT": 48}}
    class Model(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)
        def forward(self, x):
            return self.fc(x)
    def get_inputs():
        return [torch.randn(BATCH, IN)]
    def get_init_inputs():
        return [IN, OUT]
""", {"small": {"BATCH": 32, "IN": 64, "OUT": 48}})

STANDARD_LAYER_NORM = inline_problem("standard_layer_norm", """
    import torch
    import torch.nn as nn
    BATCH = 16
    DIM = 256
    class Model(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
        def forward(self, x):
            return self.norm(x)
    def get_inputs():
        x = torch.randn(BATCH, DIM)
        return [(x - x.mean(-1, keepdim=True)) / x.std(-1, unbiased=False, keepdim=True)]
    def get_init_inputs():
        return [DIM]
""", {"small": {"BATCH": 16, "DIM": 256}})
"""Inputs standardised per row: a LayerNorm that skips the mean and variance passes on them."""
