"""The compile baseline's warm-up on a real GPU (opt-in: `pytest -m gpu`)."""

from __future__ import annotations

import pytest

from feedback.environment import host_environment, known_device
from feedback.evaluate import LocalEvaluator, _reference
from feedback.result import Status

pytestmark = pytest.mark.gpu


def test_warm_compiles_the_compile_baseline_into_the_cache_before_its_timing(relu, gpu_options,
                                                                              tmp_path):
    """A batch warms each problem's torch.compile baseline while its candidates build, so the
    baseline's time job (the device to itself) loads Inductor's code instead of compiling it."""
    options = gpu_options.model_copy(update={"cache_dir": tmp_path})
    LocalEvaluator().warm(relu, "cuda", options)
    compiled = [p for p in (tmp_path / "inductor").rglob("*") if p.is_file()]
    assert compiled, "the warm job left nothing in Inductor's cache"
    device = known_device(host_environment("cuda", options.device))
    report = _reference(relu, "time", "compiled", "cuda", options, device)
    assert report.status == Status.ok and report.timing is not None, report.message
