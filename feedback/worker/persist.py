"""L2 persistence cannot outlive the cache flush (issue 12, item 5).

Why: since Ampere a kernel may reserve part of L2 for "persisting" accesses
(`cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n)`) and mark its inputs persisting with an
access-policy window on its stream or launch. Lines marked so are not evicted by the normal
accesses of the flush, so the data is still in L2 when the next timed interval reads it: a public
harness was beaten this way (4x over HBM peak reported).

Rule: before every timed interval the time job resets persisting lines to normal
(`cuCtxResetPersistingL2Cache`) and sets the persisting limit to 0; after every interval (and probe)
it reads the limit back, and a program that set it again is refused (`guard_violation`): there is
no honest use of L2 persistence under a protocol that flushes L2 between timed calls.

The driver API (`libcuda.so.1`, always present where CUDA runs) acts on the calling thread's
current context, which is torch's primary context once the worker has used the device. Its
functions are bound when this module is imported, before the candidate exists (the tamper snapshot
then watches the module like every worker module). Where the driver refuses (a GPU without the
feature, MIG) the reset is a no-op and `supported` says so.
"""

from __future__ import annotations

import ctypes

CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
"""`CU_LIMIT_PERSISTING_L2_CACHE_SIZE` of cuda.h (= `cudaLimitPersistingL2CacheSize`)."""


def _driver() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


_CUDA = _driver()
_RESET = getattr(_CUDA, "cuCtxResetPersistingL2Cache", None)
_SET_LIMIT = getattr(_CUDA, "cuCtxSetLimit", None)
_GET_LIMIT = getattr(_CUDA, "cuCtxGetLimit", None)


class PersistenceViolation(Exception):
    """A program set a persisting L2 limit during the timed calls."""


def persisting_limit() -> int | None:
    """The context's persisting-L2 limit in bytes; None when the driver cannot say."""
    if _GET_LIMIT is None:
        return None
    value = ctypes.c_size_t(0)
    if _GET_LIMIT(ctypes.byref(value), ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)) != 0:
        return None
    return int(value.value)


def reset() -> bool:
    """Limit to 0 and every persisting line back to normal; True when the driver did both."""
    if _SET_LIMIT is None or _RESET is None:
        return False
    limit_ok = _SET_LIMIT(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(0)) == 0
    return _RESET() == 0 and limit_ok


def check() -> None:
    """Raise `PersistenceViolation` when the persisting limit is no longer 0."""
    limit = persisting_limit()
    if limit:
        raise PersistenceViolation(
            f"the program set a persisting L2 cache limit ({limit} bytes, "
            "cudaLimitPersistingL2CacheSize) during the timed calls: data kept in L2 across the "
            "cache flush makes the timing unfair, so L2 persistence is not allowed")
