"""Device selection and the numeric settings every job runs under.

Why TF32 is switched off: on an fp32 problem, TF32 matmuls/convolutions give the *reference* an
error of about 1e-3, which would both hide a candidate's precision downgrade and loosen the
fp64-relative tolerance. Reference, candidate and baselines all run with the same flags, and a
candidate that flips them is caught by the tamper snapshot (issue 4, class 10).
"""

from __future__ import annotations

import contextlib
import os
import threading

import torch

from feedback.job import DEVICE_WAIT_EXIT, DEVICE_WAIT_SAID
from feedback.options import Backend

DEVICE_WAIT_S = 10.0
"""Least time a candidate's device work may take after its forward() returned, before the worker
ends itself as hung (`device_wait_limit`); raised to `DEVICE_WAIT_FACTOR` x the reference's call."""
DEVICE_WAIT_FACTOR = 100.0
_ENFORCE_WAIT = [False]


def job_device(backend: Backend, device: str) -> torch.device:
    """`cpu` for the cpp backend, else the configured CUDA device (which must exist)."""
    if backend == "cpp":
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        raise RuntimeError(f"backend {backend} needs a CUDA device, and {device} is not available")
    torch.cuda.set_device(dev)
    return dev


def make_context() -> None:
    """Make the visible GPU's CUDA context now (a standby worker before its job, when its parent
    asks: feedback/job.py, `_Standby.make_context`). A failure is left to the job, whose first use
    of the device reports it."""
    with contextlib.suppress(Exception):
        if torch.cuda.is_available():
            torch.cuda.synchronize()


def set_precision() -> None:
    """Full fp32 math for everyone: no TF32 in matmuls or cuDNN convolutions."""
    with contextlib.suppress(Exception):
        torch.backends.cuda.matmul.allow_tf32 = False
    with contextlib.suppress(Exception):
        torch.backends.cudnn.allow_tf32 = False
    with contextlib.suppress(Exception):
        torch.set_float32_matmul_precision("highest")


def synchronize(device: torch.device) -> None:
    """Wait for all work on the device (every stream), surfacing asynchronous kernel errors."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release_cached_memory(device: torch.device) -> None:
    """Give the caching allocator's free blocks back to the device, so that what is measured next
    in this process sees the free memory a fresh process would (timing.py sizes its samples on it)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


def check_launches(device: torch.device, wait_limit_s: float | None = None) -> None:
    """Surface a failed launch of the call just made (issue 4, class 3): a kernel launched with an
    invalid configuration leaves a *non-sticky* error that no synchronize reports, so launch one
    tiny kernel of torch's, whose launch check raises it, then wait for the whole device (at most
    `wait_limit_s`: see `device_wait_limit`)."""
    if device.type == "cuda":
        torch.empty(1, device=device).fill_(0)
        with device_wait_limit(wait_limit_s):
            torch.cuda.synchronize(device)


def enforce_device_waits(on: bool) -> None:
    """Let `device_wait_limit` end the process (the worker process: on; a test's in-process job:
    off, the limit is not applied)."""
    _ENFORCE_WAIT[0] = on


@contextlib.contextmanager
def device_wait_limit(limit_s: float | None):
    """Wait for the device at most `limit_s`: past it, the worker reports a hang on stderr and
    leaves with DEVICE_WAIT_EXIT, which the parent reports as a time-out. Used after a candidate's
    forward() returned, when all that is left is its device work (a Triton JIT or an autotune has
    already run on the host by then): a kernel that spins forever then costs seconds of the
    device instead of the whole job's run limit, during which a correctness job holds the device
    and every timing waits behind it. torch.cuda.synchronize releases the GIL, so the watchdog
    thread runs while the main thread waits."""
    if limit_s is None or not _ENFORCE_WAIT[0]:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        if not done.wait(limit_s):
            os.write(2, (f"\n{DEVICE_WAIT_SAID} {limit_s:.3g} s after its forward() returned "
                         "(a kernel that never ends?)\n").encode())
            os._exit(DEVICE_WAIT_EXIT)

    watchdog = threading.Thread(target=watch, name="kr-device-wait", daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()  # gone before the candidate's threads are counted


def keep_freed_memory() -> None:
    """On the CPU, let freed memory keep its poison (issue 4, class 2): glibc gives the top of the
    heap back to the OS (trimming) and serves large blocks with mmap, and either way the next
    allocation gets fresh zero pages instead of the bytes the poison pass wrote. So freed memory
    stays in the heap (no trimming; mmap only past 32 MB). Every CPU job, reference and candidate
    alike, runs with the same allocator settings."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-1, 1 << 30)   # M_TRIM_THRESHOLD
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD (its maximum on 64-bit)


_M_PERTURB = -6
PERTURB_BYTE = 0x01
"""glibc then fills each block it hands out with 0xFE bytes (PERTURB_BYTE ^ 0xFF): -1.7e38 as a
float32 or bfloat16, NaN as a float16, -257 as an int16, far beyond any reference value."""


@contextlib.contextmanager
def fresh_memory_poisoned(device: torch.device):
    """On the CPU, every block malloc hands out during the block is filled with poison first
    (glibc's M_PERTURB), so an `empty` output the candidate does not fully write reads poison
    whichever freed block it lands on (issue 4, classes 2 and 3); the poison pass alone depends on
    the allocator reusing a block it filled. Off again afterwards: never on in timed calls."""
    libc = None
    if device.type == "cpu":
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None)
            if not libc.mallopt(_M_PERTURB, PERTURB_BYTE):
                libc = None
    try:
        yield
    finally:
        if libc is not None:
            libc.mallopt(_M_PERTURB, 0)


def start_thread_pools(threads: int | None = None) -> None:
    """Start torch's CPU thread pool now, so its threads are part of the baseline thread count."""
    if threads is not None:
        torch.set_num_threads(threads)
    x = torch.ones(1 << 20)
    (x * 2).sum().item()
