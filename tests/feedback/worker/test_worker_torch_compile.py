"""A candidate that calls torch.compile itself is judged on its output and its time, not refused
for what torch.compile does to a process: Dynamo's patch of `torch.nn.Module.__init__` (tamper
check), tqdm's monitor thread and Inductor's pool of compile processes (thread and process guards).
See harness._torch_compile_ready and job.inductor_env."""

from __future__ import annotations

import pytest
import torch
from workerkit import GELU

from feedback.job import inductor_env
from feedback.result import Status

COMPILED_GELU = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gelu = torch.compile(lambda x: torch.nn.functional.gelu(x))

    def forward(self, x):
        return self.gelu(x)
"""

LEFT_RUNNING = COMPILED_GELU.replace("import torch\n", "import threading, time\nimport torch\n", 1).replace(
    "        return self.gelu(x)",
    "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n        return self.gelu(x)")


def passes(kit, kind: str, backend: str) -> None:
    # in a process of its own with a candidate job's environment, as `launch` starts it: the
    # patches torch.compile makes stay in the process
    code, report = kit.run_child(kind, GELU, COMPILED_GELU, env=inductor_env(kind, "candidate", kit.root),
                                 backend=backend, timing_trials=20)
    assert code == 0 and report is not None, kit.last_stderr[-2000:]
    assert report.status == Status.ok, report.message


@pytest.mark.parametrize("kind", ["correct", "time"])
def test_a_candidate_that_calls_torch_compile_passes(kit, kind):
    passes(kit, kind, "cpp")


@pytest.mark.gpu
@pytest.mark.timing  # its worker uses the GPU outside the evaluator's device lock
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["correct", "time"])
def test_on_a_gpu_with_the_triton_kernels_inductor_builds(kit, kind):
    passes(kit, kind, "cuda")


def test_a_thread_it_leaves_running_is_refused_all_the_same(kit):
    code, report = kit.run_child("correct", GELU, LEFT_RUNNING,
                                 env=inductor_env("correct", "candidate", kit.root))
    assert code == 0 and report is not None, kit.last_stderr[-2000:]
    assert report.status == Status.guard_violation
    assert "background thread" in report.message
