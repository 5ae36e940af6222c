"""Agent records: what the model produced (`Candidate`), how it fared (`Attempt`), runs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from feedback.result import EvalResult


class Usage(BaseModel):
    """Token usage and cost of one LLM call."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = Field(default=0, description="Tokens in the prompt.")
    completion_tokens: int = Field(default=0, description="Tokens in the response.")
    cost_usd: float | None = Field(default=None, description="Cost from litellm's table; None if unknown.")
    latency_s: float = Field(default=0.0, description="Wall time of the call, retries included.")


class Candidate(BaseModel):
    """One model response and the code extracted from it."""

    model_config = ConfigDict(frozen=True)

    problem_id: str = Field(description="Problem answered.")
    run_id: str = Field(description="Run this belongs to.")
    index: int = Field(description="Trajectory index (refinement) or sample index (sampling).")
    turn: int = Field(description="0-based turn within the trajectory (0 for samples).")
    model: str = Field(description="litellm model string (or `replay:...`).")
    template_hash: str = Field(description="Hash of the prompt templates used.")
    prompt: list[dict[str, str]] = Field(default_factory=list, description="Messages sent.")
    response: str = Field(description="Raw model text.")
    code: str | None = Field(default=None, description="Extracted code; None = no usable code block.")
    usage: Usage = Field(default_factory=Usage, description="Tokens, cost, latency.")


class Attempt(BaseModel):
    """A candidate and its evaluation."""

    model_config = ConfigDict(frozen=True)

    candidate: Candidate
    result: EvalResult | None = Field(default=None, description="None only when no code was extracted.")
    gpu_seconds: float = Field(default=0.0, description="Device-side evaluation wall time spent.")


def improves(new: Attempt, old: Attempt | None, margin: float = 0.0) -> bool:
    """Whether `new` becomes the best-so-far over `old`.

    Only a correct attempt can be best. It replaces a best without timing, and beats a timed best
    only when its median runtime is lower by more than the relative noise: the larger of `margin`
    and the noise the evaluator measured on either attempt. So noise is never reported as progress.
    """
    if new.result is None or not new.result.correct:
        return False
    if old is None or old.result is None or old.result.runtime is None:
        return True
    if new.result.runtime is None:
        return False
    noise = max(margin, new.result.noise or 0.0, old.result.noise or 0.0)
    return new.result.runtime.median_ms < old.result.runtime.median_ms * (1.0 - noise)


def best_per_turn(attempts: list[Attempt], margin: float = 0.0) -> list[int | None]:
    """Index of the best-so-far after each attempt (None until one is correct)."""
    best: int | None = None
    out: list[int | None] = []
    for i, attempt in enumerate(attempts):
        if improves(attempt, attempts[best] if best is not None else None, margin):
            best = i
        out.append(best)
    return out


class Trajectory(BaseModel):
    """The ordered attempts of one refinement run of one problem."""

    problem_id: str
    index: int
    attempts: list[Attempt] = Field(default_factory=list)
    best_per_turn: list[int | None] = Field(
        default_factory=list, description="Index into attempts of the best-so-far after each turn.")

    @classmethod
    def from_attempts(cls, attempts: list[Attempt], margin: float = 0.0) -> Trajectory:
        """Rebuild a trajectory (and its best-so-far) from its stored attempts, in turn order."""
        first = attempts[0].candidate
        return cls(problem_id=first.problem_id, index=first.index, attempts=attempts,
                   best_per_turn=best_per_turn(attempts, margin))

    def best_at(self, turns: int) -> Attempt | None:
        """The best-so-far after `turns` turns (the last one when the trajectory is shorter)."""
        marks = self.best_per_turn[:turns]
        return self.attempts[marks[-1]] if marks and marks[-1] is not None else None


class RunRecord(BaseModel):
    """Resolved configuration and provenance of a run (stored as config.json)."""

    run_id: str
    mode: str = Field(description="`refine` or `sample`.")
    config: dict[str, Any] = Field(
        description="Resolved settings (model, feedback, turns, backend...).")
    environment: dict[str, Any] = Field(default_factory=dict)
    git_commit: str | None = None
    git_dirty: bool | None = None
    packages: dict[str, str] = Field(default_factory=dict)
    template_hashes: dict[str, str] = Field(default_factory=dict)
