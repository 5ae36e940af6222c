"""Can this machine build and run a backend's kernels? Asked before a run spends anything.

`check_toolchain(backend)` looks, without starting a process or a build: for `cuda` a visible
GPU, a CUDA toolkit (torch's own CUDA_HOME detection) and its nvcc; for `triton` the package and
a GPU; for `cpp` a C++ compiler. Each missing piece is one line saying how to get it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from feedback.options import Backend

NO_GPU = ("no CUDA GPU is visible (torch.cuda.is_available() is False): run on a GPU machine, "
          "check CUDA_VISIBLE_DEVICES, or use --backend cpp")


@dataclass
class Toolchain:
    """What a backend would use here (`facts`) and what it lacks (`missing`, one line each)."""

    backend: Backend
    facts: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def check_toolchain(backend: Backend) -> Toolchain:
    """The toolchain `backend` needs on this machine; `missing` is empty when it is all there."""
    found = Toolchain(backend)
    if backend == "cpp":
        _compiler(found)
        return found
    _gpu(found)
    if backend == "cuda":
        _cuda_toolkit(found)
    elif importlib.util.find_spec("triton") is None:
        found.missing.append("triton backend: the triton package is not installed: "
                             "pip install 'kernel-refine[triton]' (or pip install triton)")
    else:
        import triton

        found.facts["triton"] = triton.__version__
    return found


def _gpu(found: Toolchain) -> None:
    import torch

    if torch.cuda.is_available():
        found.facts["gpu"] = f"{torch.cuda.get_device_name(0)} ({torch.cuda.device_count()} visible)"
    else:
        found.missing.append(f"{found.backend} backend: {NO_GPU}")


def _cuda_toolkit(found: Toolchain) -> None:
    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its import warns "no CUDA runtime" on a GPU-less machine
    try:
        from torch.utils.cpp_extension import CUDA_HOME  # env, else nvcc on PATH, else default
    finally:
        quiet.setLevel(level)

    if CUDA_HOME is None:
        found.missing.append("cuda backend: no CUDA toolkit found (CUDA_HOME unset, no nvcc on "
                             "PATH): install it and export CUDA_HOME=/usr/local/cuda")
        return
    nvcc = Path(CUDA_HOME) / "bin" / "nvcc"
    found.facts["CUDA_HOME"] = str(CUDA_HOME) + ("" if os.environ.get("CUDA_HOME") else
                                                  " (detected; CUDA_HOME unset)")
    if nvcc.is_file():
        found.facts["nvcc"] = str(nvcc)
    else:
        found.missing.append(f"cuda backend: no nvcc at {nvcc}: install the CUDA toolkit there "
                             "or export CUDA_HOME=<the toolkit holding bin/nvcc>")


def _compiler(found: Toolchain) -> None:
    name = os.environ.get("CXX") or "c++"
    path = shutil.which(name) or (None if os.environ.get("CXX") else shutil.which("g++"))
    if path:
        found.facts["c++"] = path
    else:
        found.missing.append(f"cpp backend: no C++ compiler ({name} is not on PATH): install "
                             "g++ or clang++ (apt-get install g++), or export CXX=<compiler>")
