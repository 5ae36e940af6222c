"""What a run records about where it ran: git state, package versions, machine, templates.

This is the `EvalSpec` of a run: enough to tell later whether two runs are comparable.
"""

from __future__ import annotations

import platform
import socket
from importlib import metadata
from pathlib import Path
from typing import Any

from agent.records import RunRecord
from feedback.environment import source_revision

PACKAGES = ("kernel-refine", "torch", "triton", "langgraph", "langgraph-checkpoint-sqlite",
            "litellm", "pydantic", "jinja2", "structlog", "tenacity", "ninja")
REPO = Path(__file__).resolve().parent.parent


def package_versions() -> dict[str, str]:
    """Installed versions of the packages results depend on (absent ones are left out)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def environment() -> dict[str, Any]:
    """Machine facts: Python, OS, CPU count, and the GPU torch sees (if any)."""
    import os

    import torch

    env: dict[str, Any] = {
        "python": platform.python_version(), "platform": platform.platform(),
        "hostname": socket.gethostname(), "cpus": os.cpu_count(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "gpu": None}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpu_count"] = torch.cuda.device_count()
    return env


def make_record(run_id: str, mode: str, config: dict[str, Any],
                hashes: dict[str, str]) -> RunRecord:
    """The run's config.json: resolved settings plus provenance."""
    commit, dirty = source_revision(REPO)
    return RunRecord(run_id=run_id, mode=mode, config=config, environment=environment(),
                     git_commit=commit, git_dirty=dirty, packages=package_versions(),
                     template_hashes=hashes)


def hardware_facts(backend: str, device: str = "cuda:0") -> dict[str, Any]:
    """The hardware block of the task prompt (`--hardware`): what the kernel will run on."""
    import torch

    from feedback.environment import cpu_model, peak_rates

    if backend == "cpp" or not torch.cuda.is_available():
        return {"name": f"{cpu_model()} (CPU; kernels are timed on 1 thread)"}
    props = torch.cuda.get_device_properties(device)
    facts: dict[str, Any] = {
        "name": props.name, "compute_capability": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count, "memory_gb": round(props.total_memory / 2**30)}
    tflops, bandwidth = peak_rates(props.name)
    if bandwidth:
        facts["memory_bandwidth_gbs"] = bandwidth
    if tflops:
        facts["peak_tflops"] = {"fp32": tflops}
    return facts
