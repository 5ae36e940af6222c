"""The kernels and the build load of the timing-stability benchmark (issue 15).

Kernels: the shipped honest candidates of experiments/bench/candidates, on problems of the suite at
sizes chosen for their runtime (a size here is a bench-only preset added to the problem record,
so problems/suite stays as it is): on the H200, from ~0.05 ms to a few ms, one under 0.15 ms.

Build load: `BuildLoad` keeps `workers` real compiles running through the evaluator's own build
path (`feedback.compile.compile_candidate`, so the builds get the evaluator's core placement and
priority) until stopped. Each build is a new C++ source (a nonce in it), so nothing is a cache
hit: the machine is as busy as a sweep's build pool.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from feedback.options import EvalOptions
from feedback.sandbox import kill_descendants
from problems.record import Problem
from problems.spec import select

CANDIDATES = Path(__file__).resolve().parent / "candidates"


@dataclass(frozen=True)
class Kernel:
    """One kernel of the benchmark: a suite problem at a size, and a candidate file for it."""

    name: str
    spec: str
    candidate: str
    size: dict[str, int] | None = None
    preset: str | None = None

    def problem(self) -> tuple[Problem, str | None]:
        """The problem record (with the bench size added) and the size name to evaluate at."""
        problem = select(self.spec).problems[0]
        if self.size is None:
            return problem, self.preset
        sized = problem.model_copy(update={"sizes": {**problem.sizes, "bench": dict(self.size)}})
        return sized, "bench"

    def code(self, backend: str) -> str:
        return (CANDIDATES / backend / self.candidate).read_text()


RELU, SOFTMAX, MATMUL = (f"level_1_problem_{n}_sample_0_kernel.py" for n in (19, 23, 1))
KERNELS = {
    "cuda": [
        Kernel("relu_0.05ms", "suite:level1/19", RELU, {"BATCH": 8192, "DIM": 2048}),
        Kernel("relu_0.1ms", "suite:level1/19", RELU, {"BATCH": 16384, "DIM": 2048}),
        Kernel("relu_1.7ms", "suite:level1/19", RELU),
        Kernel("softmax_0.3ms", "suite:level1/23", SOFTMAX, {"BATCH": 4096, "DIM": 16384}),
        Kernel("softmax_default", "suite:level1/23", SOFTMAX),
        Kernel("matmul_2048", "suite:level1/1", MATMUL, {"N": 2048}),
    ],
    "cpp": [
        Kernel("relu_small", "suite:level1/19", RELU, preset="small"),
        Kernel("relu_512x1024", "suite:level1/19", RELU, {"BATCH": 512, "DIM": 1024}),
        Kernel("matmul_small", "suite:level1/1", MATMUL, preset="small"),
        Kernel("matmul_128", "suite:level1/1", MATMUL, {"N": 128}),
    ],
}
SHORT = {"cuda": ["relu_0.1ms", "relu_1.7ms", "softmax_0.3ms"],
         "cpp": ["relu_512x1024", "matmul_small", "matmul_128"]}
"""The `--short` selection (`make gpu-check`): three kernels, one under 0.15 ms on the H200."""


def kernels(backend: str, short: bool, names: list[str] | None = None) -> list[Kernel]:
    """The backend's kernels: `names` when given (ValueError for one it lacks), else the `--short`
    three or all of them."""
    chosen = KERNELS[backend]
    if names:
        unknown = sorted(set(names) - {k.name for k in chosen})
        if unknown:
            raise ValueError(f"no {backend} kernel {', '.join(unknown)} in the stability suite "
                             f"(it has {', '.join(k.name for k in chosen)})")
        return [k for k in chosen if k.name in names]
    return [k for k in chosen if k.name in SHORT[backend]] if short else chosen


LOAD_CANDIDATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
// build load {nonce}
torch::Tensor relu(torch::Tensor x) {{ return torch::relu(x); }}
"""
ops = load_inline(name="kr_build_load", cpp_sources=SOURCE, functions=["relu"],
                  extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.relu(x)
'''


class BuildLoad:
    """`workers` threads, each compiling fresh C++ candidates back to back until `stop()`."""

    def __init__(self, workers: int, options: EvalOptions) -> None:
        self.options, self.finished = options, 0
        self.failed: list[str] = []
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.problem = select("suite:level1/19").problems[0]
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(workers)]

    def start(self) -> BuildLoad:
        for t in self.threads:
            t.start()
        return self

    def _loop(self) -> None:
        from feedback.compile import compile_candidate
        from feedback.result import Status

        for _ in itertools.count():
            if self.halt.is_set():
                return
            code = LOAD_CANDIDATE.format(nonce=secrets.token_hex(8))
            built = compile_candidate(self.problem, code, "cpp", self.options)
            with self.lock:
                if self.halt.is_set():
                    return  # killed by stop(), or finished after it: not counted
                if built.status == Status.ok:
                    self.finished += 1
                else:
                    self.failed.append(built.message[:300])

    def stop(self) -> int:
        """No new builds from now, and those in flight killed (a C++ build takes ~45 s, and what
        it gives is load, not a result): call it where this process runs no other child. The
        number of builds finished before."""
        self.halt.set()
        with self.lock:
            finished = self.finished
        while any(t.is_alive() for t in self.threads):  # one may start a build as it halts
            kill_descendants()
            for t in self.threads:
                t.join(0.2)
        return finished
