"""Where builds and JIT compilers keep their files in a worker (torch-free, so it can run first).

Extensions (load_inline) build into the job's `extensions_dir`, which the parent keys by source
hash, toolchain and arch; Triton's cache sits beside them unless the parent chose one; Inductor
(the torch.compile baseline) writes to scratch, the only place a worker may always write.
"""

from __future__ import annotations

import os


def configure_environment(extensions_dir: str, scratch_dir: str, arch: str | None = None) -> None:
    """Set the cache variables; before triton is imported, since it may read them once."""
    if extensions_dir:
        os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(extensions_dir, "triton"))
    if scratch_dir:
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(scratch_dir, "inductor"))
    if arch:
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", arch)
