"""The evaluator's public interface.

`evaluate()` runs every stage; the three stage functions exist so the agent's graph can show
compile -> correct -> perform as separate nodes. Each stage returns a complete `EvalResult`:
`status == ok` means "passed so far"; a failing status ends the evaluation.
"""

from __future__ import annotations

from typing import Protocol

from feedback.options import Backend, EvalOptions
from feedback.result import EvalResult
from problems.record import Problem


class Evaluator(Protocol):
    """What the agent needs from an evaluator (the local one, or a remote/Ray one)."""

    def compile(self, problem: Problem, code: str, backend: Backend, options: EvalOptions) -> EvalResult:
        """Static screen, then build the candidate (cached). ok = built and importable."""
        ...

    def correct(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        """Check the built candidate against the reference. ok = correct on every trial."""
        ...

    def perform(self, problem: Problem, code: str, backend: Backend, options: EvalOptions,
                prior: EvalResult) -> EvalResult:
        """Time the candidate and the baselines; profile when options.profile. ok = measured."""
        ...
