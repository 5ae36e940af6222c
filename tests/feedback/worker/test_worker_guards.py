"""Reward-hacking candidates (issue 4) must be refused with a message naming the trick."""

from __future__ import annotations

import pytest
from workerkit import GELU, MATMUL

from feedback.result import Status

RELU = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.rand(64, 128)]          # uniform [0, 1): relu is the identity here
def get_init_inputs():
    return []
"""

CHEATS = {
    "returns its input": ("""
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x
    """, "shares memory with input 0"),
    "returns a view of its input": ("""
        import torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return x.view(x.shape)
    """, "shares memory with input 0"),
    "uses its input as scratch space": ("""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                x.add_(1.0)
                return torch.relu(x - 1.0)
    """, "input 0 was modified in place"),
    "writes into its input then copies": ("""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                y = torch.relu(x)
                x.mul_(0.5)
                return y
    """, "input 0 was modified in place"),
    "expanded output": ("""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                row = torch.relu(x[:1]).clone()
                return row.expand_as(x)
    """, "stride-0"),
    "tensor subclass": ("""
        import torch, torch.nn as nn
        class Lazy(torch.Tensor):
            pass
        class ModelNew(nn.Module):
            def forward(self, x):
                return torch.relu(x).as_subclass(Lazy)
    """, "torch.Tensor subclass"),
    "parameter output": ("""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return nn.Parameter(torch.relu(x))
    """, "subclass"),
    "background thread": ("""
        import threading, time, torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                def work():
                    time.sleep(0.2)
                    out.copy_(torch.relu(x))
                threading.Thread(target=work, name="sneaky").start()
                return out
    """, "background thread"),
    "cached output buffer": ("""
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.out = None
            def forward(self, x):
                if self.out is None:
                    self.out = torch.empty_like(x)
                return torch.relu(x, out=self.out) if False else self.out.copy_(torch.relu(x))
    """, "earlier call"),
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheat_is_a_guard_violation_naming_the_trick(kit, name):
    candidate, words = CHEATS[name]
    report = kit.run("correct", RELU, candidate)
    assert report.status == Status.guard_violation, (name, report.status, report.message)
    assert words in report.message, report.message


def test_uninitialised_output_reads_poison_not_stale_answers(kit):
    report = kit.run("correct", RELU, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                out[: x.shape[0] // 2] = torch.relu(x[: x.shape[0] // 2])   # partial write
                return out
    """)
    assert report.status == Status.mismatch, report.message


def test_honest_kernels_are_not_refused(kit):
    # a contiguous copy of a transposed result and a fresh output: must pass every guard
    report = kit.run("correct", MATMUL, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return (b.t() @ a.t()).t().contiguous()
    """)
    assert report.status == Status.ok, report.message
    report = kit.run("correct", GELU, """
        import math, torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    """)
    assert report.status == Status.ok, report.message


def test_a_joined_worker_thread_is_fine(kit):
    report = kit.run("correct", RELU, """
        import threading, torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty_like(x)
                t = threading.Thread(target=lambda: out.copy_(torch.relu(x)))
                t.start()
                t.join()
                return out
    """)
    assert report.status == Status.ok, report.message


@pytest.mark.parametrize("numel", [4096, 16384, 1 << 20, 1 << 24])
def test_cpu_blocks_handed_out_during_a_candidate_call_hold_poison(numel):
    """glibc's M_PERTURB, on only around the candidate's call: whichever freed block an `empty`
    output lands on, its bytes are 0xFE, never a stale reference answer; off again afterwards."""
    import torch

    from feedback.worker import devices

    stale = [torch.randn(n) for n in (numel, numel // 2, 3 * numel)]
    del stale
    poison = int.from_bytes(bytes([devices.PERTURB_BYTE ^ 0xFF] * 4), "little", signed=True)
    with devices.fresh_memory_poisoned(torch.device("cpu")):
        inside = torch.empty(numel)
        assert bool((inside.view(torch.int32) == poison).all())
    assert float(inside[0]) < -1e38   # what a float32 reader of the unwritten part sees
    assert not bool((torch.empty(numel).view(torch.int32) == poison).all())  # off again


def test_held_outputs_must_not_share_memory_found_by_one_sort():
    import torch

    from feedback.worker import guards

    base = torch.zeros(64)
    apart = [torch.zeros(8), (torch.zeros(4), torch.zeros(4)), torch.zeros(0), torch.zeros(8)]
    guards.check_apart(apart)  # distinct storages, an empty one, a tuple output
    for outputs in ([torch.zeros(8), base[:8], torch.zeros(8), base[40:]],  # two views of one
                    [base, torch.zeros(2), (torch.zeros(3), base[10:12])]):  # inside a tuple
        with pytest.raises(Exception, match="earlier call"):
            guards.check_apart(outputs)


def test_child_processes_finds_the_children_of_every_thread_as_the_proc_scan_does():
    import subprocess
    import threading

    from feedback.worker.guards import _scan_children, child_processes

    started = [subprocess.Popen(["sleep", "30"])]
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
    thread.start()
    thread.join()
    try:
        pids = {p.pid for p in started}
        assert pids <= set(child_processes()) and set(child_processes()) == set(_scan_children())
    finally:
        for p in started:
            p.kill()
            p.wait()


def test_settling_catches_a_write_after_return_and_counts_its_block_towards_the_pause(monkeypatch):
    """`guards.settling`: a write landing during the block is a violation on exit; a block as
    long as the pause leaves nothing to sleep, a shorter one sleeps the rest; the violation wins
    over an error the block raised, which passes through when the output held still."""
    import threading
    import time

    import torch

    from feedback.result import Status
    from feedback.worker import guards
    from feedback.worker.errors import JobFailure

    cpu, out = torch.device("cpu"), torch.zeros(1024)
    later = threading.Timer(guards.SETTLE_S / 4, lambda: out.fill_(1.0))
    with pytest.raises(JobFailure, match="changed after forward") as caught, guards.settling(out, cpu):
        later.start()
        later.join()
    assert caught.value.status == Status.guard_violation

    slept: list[float] = []
    real_sleep = time.sleep
    monkeypatch.setattr(guards.time, "sleep", lambda s: (slept.append(s), real_sleep(s)))
    with guards.settling(out, cpu):
        pass
    assert len(slept) == 1 and 0 < slept[0] <= guards.SETTLE_S
    slept.clear()
    with guards.settling(out, cpu):
        start = time.perf_counter()
        while time.perf_counter() - start < guards.SETTLE_S:  # trusted work as long as the pause
            pass
    assert slept == []

    with pytest.raises(ValueError, match="the reference"), guards.settling(out, cpu):
        raise ValueError("the reference failed")
    with pytest.raises(JobFailure, match="changed after forward"), guards.settling(out, cpu):
        out.fill_(2.0)
        raise ValueError("the reference failed")


def test_bitwise_equal_reads_the_bits_of_every_dtype():
    import torch

    from feedback.worker.guards import _bitwise_equal

    x = torch.randn(6, 8)
    for t in (x, x.half(), x.bfloat16(), x.double(), torch.complex(x, -x), x.long(), x > 0):
        assert _bitwise_equal(t, t.clone()) and _bitwise_equal(t.t(), t.t().clone())
        assert _bitwise_equal(t[:, ::3], t[:, ::3].clone())  # a strided view
    changed = x.clone()
    changed[2, 3] = torch.nextafter(changed[2, 3], torch.tensor(1e9))
    assert not _bitwise_equal(x, changed)
    assert not _bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))  # equal values, other bits
    nan = torch.tensor([float("nan")])
    other_nan = nan.view(torch.int32).add(1).view(torch.float32)
    assert _bitwise_equal(nan, nan.clone()) and not _bitwise_equal(nan, other_nan)
    z = torch.complex(x, x)
    assert _bitwise_equal(z.conj(), z.conj().clone()) and not _bitwise_equal(z.conj(), z)


def test_an_input_written_in_place_with_its_values_kept_is_still_modified(kit):
    # inputs with negative zeros; adding 0.0 in place keeps every value and flips those zeros' sign
    zeros = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    x = torch.randn(64, 128)
    return [torch.where(x > 0, x, torch.full_like(x, -0.0))]
def get_init_inputs():
    return []
"""
    report = kit.run("correct", zeros, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def forward(self, x):
                x.add_(0.0)
                return torch.relu(x)
    """)
    assert report.status == Status.guard_violation, report.message
    assert "input 0 was modified in place" in report.message
