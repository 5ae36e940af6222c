"""The static screen: precise, line-numbered reasons, and no false rejections of honest code."""

from __future__ import annotations

import textwrap

import pytest

from feedback.static import render, screen

HEAD = """\
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
"""
CPP = HEAD + """\
ops = load_inline(name="ops", cpp_sources="torch::Tensor f(torch::Tensor x);", functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.f(x)
"""
CUDA = HEAD + """\
src = '''
__global__ void k(float* y) { y[threadIdx.x] = 0; }
torch::Tensor f(torch::Tensor x) { return x; }
'''
ops = load_inline(name="ops", cpp_sources="torch::Tensor f(torch::Tensor x);", cuda_sources=src,
                  functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.f(x)
"""
TRITON = """\
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return x
"""


def errors(code: str, backend: str = "cpp") -> list[str]:
    return [f.render() for f in screen(code, backend) if f.severity == "error"]


@pytest.mark.parametrize("code,backend", [(CPP, "cpp"), (CUDA, "cuda"), (TRITON, "triton")])
def test_honest_candidates_pass(code, backend):
    assert errors(code, backend) == []


def test_syntax_error_names_the_line():
    (found,) = screen(CPP + "\ndef broken(:\n", "cpp")
    assert found.severity == "error" and found.what == "syntax error" and found.line == 11


def test_model_new_is_required():
    assert any("ModelNew" in e for e in errors(CPP.replace("ModelNew", "Other")))


@pytest.mark.parametrize("code,backend,needle", [
    (CPP, "cuda", "CUDA"),                       # no CUDA source for the cuda backend
    (CUDA, "cpp", "cuda_sources"),               # CUDA source on the cpp backend
    (TRITON, "cuda", "load_inline"),             # no build at all
    (CPP, "triton", "triton.jit"),               # no triton kernel
])
def test_backend_marker(code, backend, needle):
    assert any(needle in e for e in errors(code, backend))


def test_cuda_marker_via_global_string_without_keyword():
    code = CPP.replace('cpp_sources="torch::Tensor f(torch::Tensor x);"',
                       'cpp_sources="__global__ void k() {}"')
    assert errors(code, "cuda") == []


def test_triton_jit_imported_by_name():
    code = TRITON.replace("import triton\n", "import triton\nfrom triton import jit\n").replace(
        "@triton.jit", "@jit")
    assert errors(code, "triton") == []


@pytest.mark.parametrize("snippet,needle", [
    ("import threading", "import threading"),
    ("from concurrent.futures import ThreadPoolExecutor", "concurrent"),
    ("import multiprocessing as mp", "multiprocessing"),
    ("import subprocess", "subprocess"),
    ("import ctypes", "ctypes"),
    ("import socket", "socket"),
    ("import gc", "gc"),
    ("import inspect", "inspect"),
    ("import os\nos.system('ls')", "os.system"),
    ("import os\nos.fork()", "os.fork"),
    ("from os import system", "system"),
    ("import sys\nsys.modules['torch'] = None", "sys.modules"),
    ("import sys\nm = sys.modules", "sys.modules"),
    ("import sys\nf = sys._getframe(1)", "_getframe"),
    ("torch.allclose = lambda *a, **k: True", "assignment to torch.allclose"),
    ("import time\ntime.perf_counter = lambda: 0.0", "assignment to time.perf_counter"),
    ("import torch.nn.functional as F\nF.relu = lambda x: x", "assignment to torch.nn.functional.relu"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "assignment to torch.backends"),
    ("setattr(torch, 'matmul', None)", "setattr(torch"),
    ("torch.cuda.synchronize = lambda *a: None", "assignment to torch.cuda.synchronize"),
    ("eval('1')", "eval()"),
    ("exec('x = 1')", "exec()"),
    ("m = __import__('subprocess')", "__import__()"),
    ("class Fake(torch.Tensor):\n    pass", "Tensor"),
    ("from problem import Model", "import Model"),
    ("from feedback.worker import harness", "feedback"),
    ("from . import sibling", "relative"),
])
def test_forbidden_constructs(snippet, needle):
    found = errors(CPP + "\n" + snippet + "\n")
    assert any(needle in e for e in found), found
    assert all(e.startswith("line ") for e in found if needle in e)


def test_subclassing_the_reference():
    code = CPP + "\n\nclass Model(nn.Module):\n    pass\n" 
    code = code.replace("class ModelNew(nn.Module)", "class ModelNew(Model)")
    assert any("ModelNew(Model)" in e for e in errors(code))


def test_try_except_around_the_kernel_in_forward():
    code = CPP.replace("        return ops.f(x)", textwrap.indent(
        "try:\n    return ops.f(x)\nexcept Exception:\n    return torch.relu(x)", " " * 8))
    assert any("try/except in forward" in e for e in errors(code))


def test_try_except_around_the_build():
    code = CPP.replace('ops = load_inline(', 'try:\n    ops = load_inline(').replace(
        'functions=["f"])', 'functions=["f"])\nexcept Exception:\n    ops = None')
    assert any("around the build" in e for e in errors(code))


def test_honest_code_near_the_rules_is_not_rejected():
    code = CPP + textwrap.dedent("""
        import os
        import math
        os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
        class Helper:
            pass
        h = Helper()
        h.value = math.pi            # attribute of a local object, not a module
        try:
            import numpy            # a try that does not touch the build
        except ImportError:
            numpy = None
        w = torch.load if False else None
        """)
    assert errors(code) == []


def test_soft_findings_are_warnings():
    code = CPP + "\nimport sys\ns = torch.cuda.Stream()\nsys.exit(0)\n"
    found = screen(code, "cpp")
    assert not [f for f in found if f.severity == "error"]
    assert {f.what for f in found if f.severity == "warning"} >= {"torch.cuda.Stream()", "sys.exit()"}


def test_render_lists_every_error():
    text = render(screen(CPP + "\nimport threading\nimport subprocess\n", "cpp"))
    assert "threading" in text and "subprocess" in text and len(text.splitlines()) == 2
