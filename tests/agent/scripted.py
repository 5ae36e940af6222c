"""Test helpers: a scripted evaluator (implements feedback.api.Evaluator) and replay transcripts.

A candidate states its own fate in a comment, `# outcome: compile_error`, `# outcome: mismatch`
or `# outcome: ok 0.50 0.02` (median ms, relative noise), so routing tests need no compiler.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from feedback.result import Correctness, EvalResult, Status, TimingStats

EAGER_MS = 1.0


def code(outcome: str) -> str:
    """A minimal candidate whose fate is OUTCOME."""
    return f"import torch\n# outcome: {outcome}\nclass ModelNew(torch.nn.Module):\n    pass\n"


def response(outcome: str | None) -> str:
    """A model response: prose plus one fenced block (none when OUTCOME is None)."""
    if outcome is None:
        return "I would fuse the operators, but here is only my plan."
    return f"Here is the kernel.\n```python\n{code(outcome)}```\n"


def write_transcript(path: Path, turns: dict[tuple[str, int, int], str | None]) -> Path:
    """A replay JSONL file: {(problem, index, turn): outcome or None for no code}."""
    with path.open("w") as f:
        for (problem, index, turn), outcome in turns.items():
            f.write(json.dumps({"problem": problem, "index": index, "turn": turn,
                                "response": response(outcome)}) + "\n")
    return path


class ScriptedEvaluator:
    """Evaluates by reading the candidate's `# outcome:` comment; counts every stage call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def _outcome(self, stage: str, code: str) -> list[str]:
        with self._lock:
            self.calls.append((stage, code))
        return re.search(r"# outcome: (.*)", code).group(1).split()

    @staticmethod
    def _base(problem, code, backend) -> EvalResult:
        return EvalResult(status=Status.ok, backend=backend, problem_id=problem.id,
                          code_hash=str(hash(code)))

    def compile(self, problem, code, backend, options):
        kind = self._outcome("compile", code)[0]
        result = self._base(problem, code, backend)
        if kind == "compile_error":
            return result.model_copy(update={"status": Status.compile_error, "stage": "compile",
                                             "message": "error: expected ';'"})
        return result

    def correct(self, problem, code, backend, options, prior):
        kind = self._outcome("correct", code)[0]
        if kind == "mismatch":
            return prior.model_copy(update={
                "status": Status.mismatch, "stage": "correct", "message": "values differ",
                "correctness": Correctness(trials=5, trials_passed=0, max_abs_err=1.0)})
        return prior.model_copy(update={"correctness": Correctness(trials=5, trials_passed=5)})

    def perform(self, problem, code, backend, options, prior):
        _, ms, noise = self._outcome("perform", code)
        ms, noise = float(ms), float(noise)
        timing = TimingStats(median_ms=ms, mean_ms=ms, std_ms=0.0, min_ms=ms, max_ms=ms, n=10,
                             clock="host_wall")
        return prior.model_copy(update={"runtime": timing, "noise": noise,
                                        "speedup_eager": EAGER_MS / ms})
