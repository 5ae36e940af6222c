"""Facts about the machine: toolchain fingerprint, GPU identity and peak rates, child environment.

The toolchain fingerprint is part of every build-cache key (a cached .so is only valid for the
torch, compiler and GPU architecture that built it). Peak rates feed the roofline (speed-of-light)
check. The child environment is built from an allow-list so that no secret of the parent (API
keys, tokens) reaches candidate code.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import socket
import tempfile
from pathlib import Path

import torch

from feedback.result import Environment, Roofline
from feedback.sandbox import run_child

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARCH = "9.0"  # what CUDA builds target when no GPU is visible (the H200 of the GPU runs)

# name fragment -> (fp32 non-tensor-core TFLOP/s, memory bandwidth GB/s); first match wins.
PEAK_RATES: list[tuple[str, float, float]] = [
    ("H200", 67.0, 4800.0), ("H100 PCIe", 51.0, 2000.0), ("H100", 67.0, 3350.0),
    ("GH200", 67.0, 4000.0), ("B200", 80.0, 8000.0), ("A100-SXM4-80GB", 19.5, 2039.0),
    ("A100", 19.5, 1555.0), ("L40S", 91.6, 864.0), ("L4", 30.3, 300.0), ("A10G", 31.2, 600.0),
    ("A10", 31.2, 600.0), ("RTX 4090", 82.6, 1008.0), ("V100", 15.7, 900.0), ("T4", 8.1, 320.0),
]

# Variables a child may inherit from the parent; everything else is dropped.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
             "NVCC_APPEND_FLAGS", "TRITON_PTXAS_PATH", "TORCH_CUDA_ARCH_LIST")


def _probe_lines(argv: list[str]) -> list[str]:
    """Stdout lines of a quick tool query (`nvcc --version`), [] when it fails."""
    if not shutil.which(argv[0]):
        return []
    with tempfile.TemporaryDirectory(prefix="kr-probe-") as tmp:
        out = run_child(argv, cwd=Path(tmp), env={"PATH": os.environ.get("PATH", "")},
                        timeout_s=30, isolate=False)
    return [ln.strip() for ln in out.stdout_tail.splitlines() if ln.strip()] if out.ok else []


def source_revision(repo: Path = REPO_ROOT) -> tuple[str | None, bool | None]:
    """(git commit, dirty flag) of the source tree for run provenance; (None, None) outside git.

    Lives here because only feedback/ starts processes; the queries are read-only.
    """
    commit = _probe_lines(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if not commit:
        return None, None
    changes = _probe_lines(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    return commit[0], bool(changes)


@functools.cache
def nvcc_version() -> str | None:
    """`Cuda compilation tools, release X, VX` of the nvcc that builds extensions."""
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    nvcc = str(Path(home) / "bin" / "nvcc") if (Path(home) / "bin" / "nvcc").exists() else "nvcc"
    return next((ln for ln in _probe_lines([nvcc, "--version"]) if "release" in ln), None)


@functools.cache
def cxx_version() -> str | None:
    """First line of `c++ --version` (the host compiler)."""
    return next(iter(_probe_lines([os.environ.get("CXX", "c++"), "--version"])), None)


@functools.cache
def gpu_facts(index: int) -> dict[str, str]:
    """name / compute_cap / driver of GPU `index` from nvidia-smi, without a CUDA context here."""
    lines = _probe_lines(["nvidia-smi", "--query-gpu=name,compute_cap,driver_version",
                          "--format=csv,noheader", "-i", str(index)])
    parts = [p.strip() for p in lines[0].split(",")] if lines else []
    return dict(zip(("name", "compute_cap", "driver"), parts)) if len(parts) == 3 else {}


def device_index(device: str) -> int:
    """`cuda:3` -> 3; `cuda` -> 0."""
    _, _, idx = device.partition(":")
    return int(idx) if idx.isdigit() else 0


def cuda_arch(device: str, configured: str | None) -> str:
    """The TORCH_CUDA_ARCH_LIST a build targets: configured, else the device's, else DEFAULT_ARCH."""
    return configured or gpu_facts(device_index(device)).get("compute_cap") or DEFAULT_ARCH


def toolchain(backend: str) -> dict[str, str | None]:
    """What a compiled artifact depends on besides its source."""
    facts: dict[str, str | None] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                                    "python": platform.python_version(), "cxx": cxx_version(),
                                    "machine": platform.machine()}
    if backend == "cuda":
        facts["nvcc"] = nvcc_version()
    if backend == "triton":
        try:
            from importlib.metadata import version
            facts["triton"] = version("triton")
        except Exception:  # triton not installed: the build will say so
            facts["triton"] = None
    return facts


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_environment(backend: str, device: str) -> Environment:
    """Where an evaluation runs, as far as the parent can tell without touching the GPU."""
    gpu = gpu_facts(device_index(device)) if backend != "cpp" else {}
    compiler = nvcc_version() if backend == "cuda" else cxx_version()
    return Environment(device=gpu.get("name") or (cpu_model() if backend == "cpp" else device),
                       driver=gpu.get("driver"), torch=torch.__version__, cuda=torch.version.cuda,
                       compiler=compiler, python=platform.python_version(),
                       hostname=socket.gethostname())


def known_device(env: Environment | None) -> str | None:
    """The device's real name (`NVIDIA H200`, a CPU model), None when only `cuda:N` is known."""
    return env.device if env is not None and env.device and not env.device.startswith("cuda") \
        else None


def child_env(*, scratch: Path, extensions_dir: Path | None, gpu_index: int | None,
              arch: str | None, threads: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a worker child (allow-listed; HOME and TMPDIR in its scratch)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOW}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("CUDA_HOME", "/usr/local/cuda")
    # the children import what the parent imports: the project first, then the parent's path
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONPATH=pythonpath,
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), MAX_JOBS=str(max(1, os.cpu_count() or 1)),
               CUDA_VISIBLE_DEVICES="" if gpu_index is None else str(gpu_index),
               CUDA_MODULE_LOADING="LAZY")
    if extensions_dir is not None:
        env.update(TORCH_EXTENSIONS_DIR=str(extensions_dir),
                   TRITON_CACHE_DIR=str(extensions_dir / "triton"))
    if arch:
        env["TORCH_CUDA_ARCH_LIST"] = arch
    env.update(extra or {})
    return env


def peak_rates(device_name: str, tflops: float | None = None,
               bandwidth_gbs: float | None = None) -> tuple[float | None, float | None]:
    """(fp32 TFLOP/s, GB/s) for a device: configured values win, else the table, else None."""
    for fragment, t, b in PEAK_RATES:
        if fragment.lower() in device_name.lower():
            return tflops or t, bandwidth_gbs or b
    return tflops, bandwidth_gbs


def roofline(flops: float | None, min_bytes: float | None, median_ms: float | None,
             device_name: str, tflops: float | None = None,
             bandwidth_gbs: float | None = None) -> Roofline | None:
    """Speed-of-light time = max(flops / peak, bytes / bandwidth); beating it is suspicious."""
    if flops is None and min_bytes is None:
        return None
    peak, bw = peak_rates(device_name, tflops, bandwidth_gbs)
    bounds = [x for x in ((flops / (peak * 1e12) if flops and peak else None),
                          (min_bytes / (bw * 1e9) if min_bytes and bw else None)) if x]
    sol_ms = max(bounds) * 1e3 if bounds else None
    fraction = sol_ms / median_ms if sol_ms and median_ms else None
    return Roofline(flops=flops, min_bytes=min_bytes, sol_ms=sol_ms, fraction=fraction,
                    suspicious=bool(fraction and fraction > 1.0))

