"""Where a problem's inputs are drawn (inputs.make_inputs): on the job's device, or on the CPU
for a `get_inputs` that cannot run there, and never one then the other for the same problem.
The meta device stands in for a GPU: `get_inputs` runs under it as it would under `cuda:0`."""

import types

import pytest
import torch

from feedback.worker import inputs

META = torch.device("meta")


def problem(draw) -> types.ModuleType:
    module = types.ModuleType("problem_under_test")
    module.calls = []

    def get_inputs():
        on_device = torch.empty(0).device.type != "cpu"
        module.calls.append(on_device)
        return draw(on_device, len(module.calls))
    module.get_inputs = get_inputs
    return module


def test_running_short_of_device_memory_is_raised_not_drawn_on_the_cpu_instead():
    """The CPU's generator draws other values from the same seed: an OOM under memory that other
    jobs hold must fail the job (the evaluator runs it again alone), not change the inputs."""
    def draw(on_device, n):
        if on_device:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [torch.randn(4)]
    module = problem(draw)
    with pytest.raises(torch.OutOfMemoryError):
        inputs.make_inputs(module, META, seed=1)
    assert module.calls == [True]


def test_a_problem_drawn_on_the_device_is_never_drawn_on_the_cpu_later():
    def draw(on_device, n):
        if n > 1:
            raise RuntimeError("a later draw failed on the device")
        return [torch.randn(4)]
    module = problem(draw)
    assert inputs.make_inputs(module, META, seed=1)[0].device == META
    with pytest.raises(RuntimeError, match="later draw"):
        inputs.make_inputs(module, META, seed=1)
    assert module.calls == [True, True]


def test_a_get_inputs_that_cannot_run_on_the_device_is_drawn_on_the_cpu_every_time():
    def draw(on_device, n):
        if on_device:
            raise TypeError("numpy cannot draw on this device")
        return [torch.randn(4)]
    module = problem(draw)
    first = inputs.make_inputs(module, META, seed=1)
    second = inputs.make_inputs(module, META, seed=1)
    assert first[0].device == second[0].device == META
    assert module.calls == [True, False, False]  # the device is tried once, not at every draw


def test_refill_writes_the_fresh_values_and_returns_them_in_the_buffers_structure():
    """The returned copy is pristine: the drawn tensors (not the buffers), the buffers' other
    leaves, equal to the refilled buffers bit for bit."""
    buffers = [torch.zeros(3, 4).t(), (torch.zeros(2, dtype=torch.int64), 7), {"k": torch.zeros(5)}]
    fresh = [torch.randn(4, 3), (torch.arange(2), 9), {"k": torch.full((5,), -0.0)}]
    pristine = inputs.refill(buffers, fresh)
    assert pristine[1][1] == 7 and isinstance(pristine[1], tuple)
    for kept, buffer, drawn in zip(inputs.tensors(pristine), inputs.tensors(buffers), inputs.tensors(fresh)):
        assert kept is drawn and kept is not buffer
        assert torch.equal(kept, buffer)
    assert torch.signbit(buffers[2]["k"]).all()
