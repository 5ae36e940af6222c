"""A simulated evaluator for scheduler benchmarks: every stage costs a set time; nothing is judged.

SIMULATED RESULTS: every `EvalResult` it returns is invented (status ok, a made-up runtime that
improves a little each turn) and says `simulated` in its environment; such runs measure the
scheduler and the framework around it, never a kernel.

- compile: sleeps `compile_s`. The real evaluator builds in a child process that the calling thread
  waits for, so the scheduler sees the same thing: one thread blocked, no CPU used by this process.
- correct, perform: `gpu_s` each of real work on the device when it is a CUDA device (fp32 matmuls
  of 4096x4096 on one resident operand, synchronised, until the time is up); on a machine without
  one a sleep, and `gpu_work` says `simulated (sleep, no GPU)`.

Each call is recorded (`calls`: stage, key, start/end on the monotonic clock, the thread's CPU
seconds), keyed by the `# sim-key: PROBLEM INDEX TURN` line the benchmark's transcript puts in
every candidate, so the benchmark can attribute each stage's time to its turn.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from feedback.options import Backend, EvalOptions
from feedback.result import Correctness, Environment, EvalResult, Status, TimingStats
from problems.record import Problem

KEY_LINE = re.compile(r"# sim-key: (\S+) (\d+) (\d+)")
ENVIRONMENT = Environment(device="simulated (experiments/bench/simulated.py)", torch="simulated",
                          python="simulated")


def candidate_code(problem: str, index: int, turn: int) -> str:
    """A candidate carrying its key (what the benchmark's replay transcript answers with)."""
    return (f"import torch\n# sim-key: {problem} {index} {turn}\n"
            "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            "        return torch.relu(x)\n")


@dataclass(frozen=True)
class StageCall:
    """One stage call as the evaluator itself saw it."""

    stage: str
    key: tuple[str, int, int]
    start: float
    end: float
    cpu_s: float
    """CPU seconds of the calling thread during the call (GPU launches and syncs)."""


class SimulatedEvaluator:
    """Implements `feedback.api.Evaluator` with set costs per stage (see the module docstring)."""

    def __init__(self, compile_s: float, gpu_s: float, device: str = "cuda:0"):
        self.compile_s = compile_s
        self.gpu_s = gpu_s
        self.calls: list[StageCall] = []
        self._lock = threading.Lock()
        self._operand = None
        import torch

        if device.startswith("cuda") and torch.cuda.is_available():
            self._operand = torch.randn(4096, 4096, device=device)
            (self._operand @ self._operand).sum().item()  # CUDA context and cuBLAS, before the run
            self.gpu_work = f"real: fp32 matmul loop on {torch.cuda.get_device_name(device)}"
        else:
            self.gpu_work = "simulated (sleep, no GPU)"

    def _timed(self, stage: str, code: str, seconds: float, gpu: bool) -> tuple[str, int, int]:
        problem, index, turn = KEY_LINE.search(code).groups()
        key = (problem, int(index), int(turn))
        start, cpu = time.monotonic(), time.thread_time()
        if gpu and self._operand is not None and seconds > 0:
            self._matmuls_until(start + seconds)
        elif seconds > 0:
            time.sleep(seconds)
        call = StageCall(stage, key, start, time.monotonic(), time.thread_time() - cpu)
        with self._lock:
            self.calls.append(call)
        return key

    def _matmuls_until(self, deadline: float) -> None:
        import torch

        x = self._operand
        while time.monotonic() < deadline:
            torch.mm(x, x)  # the work is the point; the result is dropped
            torch.cuda.synchronize(x.device)

    def compile(self, problem: Problem, code: str, backend: Backend,
                options: EvalOptions) -> EvalResult:
        self._timed("compile", code, self.compile_s, gpu=False)
        return EvalResult(status=Status.ok, backend=backend, problem_id=problem.id,
                          code_hash=str(hash(code)), environment=ENVIRONMENT,
                          stage_seconds={"compile": self.compile_s})

    def correct(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        self._timed("correct", code, self.gpu_s, gpu=True)
        return prior.model_copy(update={"correctness": Correctness(trials=5, trials_passed=5)})

    def perform(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        _, _, turn = self._timed("perform", code, self.gpu_s, gpu=True)
        ms = 1.0 / (1.0 + 0.1 * turn)
        timing = TimingStats(median_ms=ms, mean_ms=ms, std_ms=0.0, min_ms=ms, max_ms=ms, n=10,
                             clock="simulated")
        eager = timing.model_copy(update={"median_ms": 1.0, "mean_ms": 1.0, "min_ms": 1.0,
                                          "max_ms": 1.0})
        return prior.model_copy(update={"runtime": timing, "eager": eager, "noise": 0.01,
                                        "speedup_eager": 1.0 / ms})
