"""Where a job ran: device, driver, torch/CUDA versions, host — without running nvidia-smi.

The driver version is read from pynvml when installed, else from /proc/driver/nvidia/version;
the CUDA toolkit version from $CUDA_HOME/version.json
or include/cuda.h. Each probe fails soft (None).
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
from pathlib import Path

import torch

from feedback.environment import cpu_model
from feedback.result import Environment


def describe_environment(device: torch.device | None, backend: str) -> Environment:
    """`compiler` is the CUDA toolkit for cuda/triton; None on cpp (the parent knows the host c++)."""
    return Environment(device=_device_name(device), driver=_driver(), torch=torch.__version__,
                       cuda=torch.version.cuda, compiler=_toolkit() if backend != "cpp" else None,
                       python=platform.python_version(),
                       hostname=socket.gethostname())


def _device_name(device: torch.device | None) -> str:
    if device is not None and device.type == "cuda":
        try:
            return torch.cuda.get_device_name(device)
        except Exception:
            pass
    return cpu_model()


def _driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:
        pass
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return match.group(1) if match else None


def _toolkit() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    try:
        data = json.loads((Path(home) / "version.json").read_text())
        return f"CUDA toolkit {data['cuda']['version']}"
    except Exception:
        pass
    try:  # older or slimmer toolkits: the version macro in cuda.h
        header = (Path(home) / "include" / "cuda.h").read_text(errors="replace")
        number = int(re.search(r"#define CUDA_VERSION (\d+)", header).group(1))
        return f"CUDA toolkit {number // 1000}.{number % 1000 // 10}"
    except Exception:
        return None
