"""The Ray executor with one GPU actor (opt-in: `pytest -m gpu tests/feedback/test_ray_gpu.py`):
a correct CUDA kernel gives the local executor's result, and a kernel that makes an illegal
memory access gets its actor replaced before the next candidate runs.
"""

from __future__ import annotations

import pytest
import ray
from candidates import cuda_candidate, deterministic

from feedback.evaluate import evaluate
from feedback.ray_executor import RayEvaluator
from feedback.result import Status

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_ray():
    ray.init(address="local", num_cpus=4, num_gpus=1, include_dashboard=False)
    yield
    ray.shutdown()


def test_one_gpu_actor_matches_the_local_executor(gpu_ray, relu, fast_options):
    options = fast_options.model_copy(update={"device": "cuda:0", "run_timeout_s": 60,
                                              "compile_timeout_s": 600})
    ev = RayEvaluator()  # one actor per GPU of the cluster: one
    try:
        pool = ev.pool("cuda")
        (first,) = pool.workers()
        good = evaluate(relu, cuda_candidate("relu"), "cuda", options, evaluator=ev)
        wild = evaluate(relu, cuda_candidate("wild"), "cuda", options, evaluator=ev)
        replaced = pool.replaced
        again = evaluate(relu, cuda_candidate("relu"), "cuda", options, evaluator=ev)
        (second,) = pool.workers()
    finally:
        ev.close()
    local = evaluate(relu, cuda_candidate("relu"), "cuda", options)
    assert first.device == "cuda:0" and first.arch, first
    assert good.status == Status.ok, good.message
    assert deterministic(good) == deterministic(local)
    assert good.runtime.clock == "cuda_events" and good.speedup_eager is not None
    assert good.environment.device.startswith("NVIDIA"), good.environment
    assert wild.status == Status.runtime_error, wild.message
    assert replaced == 1 and second.pid != first.pid, (wild.message, replaced)
    assert again.status == Status.ok and deterministic(again) == deterministic(local)
