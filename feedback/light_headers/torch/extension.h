// kernel-refine fastbuild (feedback/fastbuild_light.py): what `#include <torch/extension.h>`
// reads in a CUDA translation unit built light. torch/types.h is what load_inline puts first in
// every CUDA source anyway; torch/all.h (the C++ frontend: nn, optim, data, serialize, jit) and
// torch/python.h (pybind11 and Python's headers) are left out. A source that needs them does not
// compile light and is built again exactly as torch would build it.
#pragma once
#include <torch/types.h>
