"""Speed-of-light bound from FLOPs, bytes and the device's peak rates (hand-computed)."""

from __future__ import annotations

import pytest

from feedback.environment import peak_rates, roofline


def test_known_gpus_and_configured_rates():
    assert peak_rates("NVIDIA H200") == (67.0, 4800.0)
    assert peak_rates("NVIDIA H100 PCIe") == (51.0, 2000.0)
    assert peak_rates("NVIDIA H100 80GB HBM3") == (67.0, 3350.0)
    assert peak_rates("Mystery GPU") == (None, None)
    assert peak_rates("Mystery GPU", 10.0, 100.0) == (10.0, 100.0)
    assert peak_rates("NVIDIA H200", bandwidth_gbs=1000.0) == (67.0, 1000.0)


def test_memory_bound_problem():
    # 4.8 GB at 4800 GB/s = 1 ms; FLOPs 0 (elementwise) do not bound it
    r = roofline(0.0, 4.8e9, 2.0, "NVIDIA H200")
    assert r.sol_ms == pytest.approx(1.0) and r.fraction == pytest.approx(0.5) and not r.suspicious


def test_compute_bound_problem_and_faster_than_light():
    # 6.7e13 FLOP at 67 TFLOP/s = 1 s = 1000 ms; bytes negligible
    r = roofline(6.7e13, 1e6, 500.0, "NVIDIA H200")
    assert r.sol_ms == pytest.approx(1000.0) and r.fraction == pytest.approx(2.0) and r.suspicious


def test_unknown_device_has_no_bound():
    r = roofline(1e9, 1e6, 1.0, "AMD EPYC")
    assert r.sol_ms is None and r.fraction is None and not r.suspicious
    assert roofline(None, None, 1.0, "NVIDIA H200") is None
