"""The untrusted-code limits, seen from the cpp backend: the candidates of the faults batch that hit
each one (faults.py, through `evaluate_many`) get the right status and a message saying which
limit (docs/security.md).

Sizes are small enough for a 24 GB machine: one 3.2 GB *virtual* reservation that the address-space
limit refuses before any page is touched, 5000 descriptors of /dev/null, a 300 MB write that the
file-size limit stops at 256 MiB, one forked sleeper. Never a fork loop (root ignores RLIMIT_NPROC).
The CPU-time limit (4 x the wall limit + 10 s per process) cannot fire before the wall limit on
two cores; tests/feedback/test_sandbox.py::test_cpu_time_limit proves it at the sandbox level.
"""

from __future__ import annotations

import os
import time

import pytest
from faults import FAULTS, MARKER
from hardkit import leaked_workers

from feedback.sandbox import isolation_available

pytestmark = pytest.mark.slow

LIMITS = ["wall_time_python", "wall_time_native", "address_space", "open_files", "output_size",
          "child_process", "write_outside_scratch", "network", "write_scratch_is_fine"]


@pytest.fixture(scope="module")
def results(fault_batch):
    """The limit-hitting candidates of the faults batch, by limit (first of each)."""
    got, _ = fault_batch
    out = {}
    for f, r in zip(FAULTS, got):
        if f.limit and f.limit not in out:
            out[f.limit] = (f, r)
    return out


@pytest.mark.parametrize("name", LIMITS)
def test_limit_gives_its_status_and_names_itself(results, name):
    layers = isolation_available()
    if name == "write_outside_scratch" and "mounts" not in layers:
        pytest.skip("no mount namespace here: the project tree stays writable (documented)")
    if name == "network" and "net" not in layers:
        pytest.skip("no network namespace here (documented as best effort)")
    fault, r = results[name]
    assert r.status == fault.status, f"{r.status.value}: {r.message[:1500]}"
    assert fault.words in r.message, r.message[:1500]


def test_nothing_was_written_outside_scratch(results):
    if "mounts" in isolation_available():
        assert not MARKER.exists()
    MARKER.unlink(missing_ok=True)


def test_no_process_outlives_its_job(results):
    deadline = time.monotonic() + 5
    while leaked_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leaked_workers() == []


def test_the_child_limits_are_the_documented_ones():
    from feedback.job import RUN_FILE_BYTES
    from feedback.sandbox import _limits

    limits = _limits(cpu_time_s=42, memory_mb=5000, max_output_bytes=RUN_FILE_BYTES, gpu=False,
                     nofile=4096)
    assert limits["RLIMIT_AS"] == (5000 << 20,) * 2 and limits["RLIMIT_FSIZE"][0] == 256 << 20
    assert limits["RLIMIT_CPU"] == (42, 47) and limits["RLIMIT_CORE"] == (0, 0)
    assert limits["RLIMIT_NOFILE"][0] <= 4096
    assert "RLIMIT_AS" not in _limits(42, 5000, RUN_FILE_BYTES, gpu=True, nofile=4096)
    assert os.environ.get("KR_NEVER_SET") is None
