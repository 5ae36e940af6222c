"""The compile baseline's inductor build made before its job asks for the device (precompile.py):
the timed compile then finds it in the caches, nothing of the reference runs ahead, and a build
that cannot be made ahead changes nothing."""

from __future__ import annotations

import secrets

import pytest
import torch
from workerkit import MATMUL

from feedback.result import Status
from feedback.worker import precompile

pytestmark = pytest.mark.slow  # inductor's C++ builds: ~10 s each here

GATHER = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.full((n,), SCALE))
    def forward(self, x, idx):
        return torch.relu(x[idx] * self.scale)

def get_inputs():
    return [torch.randn(64, 32), torch.randint(0, 64, (16,))]

def get_init_inputs():
    return [32]
"""


def _unique(source: str) -> str:
    """A graph no earlier test has cached: a constant of its own."""
    return source.replace("SCALE", repr(1 + secrets.randbelow(10**6) / 10**7))


def _counts() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {k: counters["inductor"][k] for k in ("fxgraph_cache_miss", "fxgraph_cache_hit")}


@pytest.fixture
def inductor_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))


def test_the_timed_compile_finds_the_build_made_ahead(kit, inductor_cache):
    """Also: nothing ran ahead. The indices are uninitialised there, so the gather would fail
    if the graph ran, and the timed compile would then build again (two misses)."""
    before = _counts()
    report = kit.run("time", _unique(GATHER), None, role="compiled")
    assert report.status == Status.ok, report.message
    after = _counts()
    # built once, ahead (a miss), then found by the compile the job times (a hit)
    assert after["fxgraph_cache_miss"] - before["fxgraph_cache_miss"] == 1
    assert after["fxgraph_cache_hit"] - before["fxgraph_cache_hit"] == 1
    assert {"precompile", "compile"} <= set(report.phases)


def test_a_build_that_cannot_be_made_ahead_leaves_the_job_as_it_was(kit, inductor_cache):
    reads_a_value = MATMUL.replace("    def forward(self, a, b):", (
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.k = int(torch.ones(1).sum().item())  # no value on the meta device\n"
        "    def forward(self, a, b):"))
    job = kit.job("time", reads_a_value, None, role="compiled")
    assert precompile.build(job, torch.device("cpu")) is False
    breaks_first = MATMUL.replace("        return a @ b", "        torch._dynamo.graph_break()\n"
                                  "        return a @ b")
    assert breaks_first != MATMUL  # a break would run the code before it: nothing is built
    assert precompile.build(kit.job("time", breaks_first, None, role="compiled"),
                            torch.device("cpu")) is False
    assert precompile.build(kit.job("time", MATMUL, None, role="compiled",
                                    compile_mode="max-autotune-no-cudagraphs"),
                            torch.device("cpu")) is False  # autotuning runs kernels: not ahead
    before = _counts()
    report = kit.run("time", reads_a_value, None, role="compiled")
    assert report.status == Status.ok, report.message
    assert _counts()["fxgraph_cache_miss"] - before["fxgraph_cache_miss"] == 1  # built as before
