"""Run settings: one pydantic object the CLIs fill and the Python API accepts.

`RefineSettings` drives `agent.refine.run` (multi-turn refinement), `SampleSettings` drives
`agent.sample.run` (k independent one-shot samples). `resolved()` fills the defaults that depend
on the machine or the environment (model, backend, run name) and is what `config.json` records.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from feedback.executor import Executor
from feedback.options import Backend

MODEL_ENV = "KERNEL_REFINE_MODEL"
DEMO_COMMAND = (
    "make demo   (= .venv/bin/python -m agent.refine --model replay:experiments/demo/demo.jsonl "
    "--backend cpp --size small --problems suite:level1/19,suite:level1/1,suite:level2/1 "
    "--turns 4 --feedback G+E+P --out runs)"
)


class MissingModelError(ValueError):
    """No --model and no KERNEL_REFINE_MODEL: the message says how to choose one."""

    def __init__(self) -> None:
        super().__init__(
            "no model chosen. Pass --model MODEL, a litellm model string such as "
            "openai/gpt-4o, anthropic/claude-sonnet-4-5 or deepseek/deepseek-reasoner (the "
            "provider's API key in its usual variable, e.g. OPENAI_API_KEY), or a local server: "
            "--model hosted_vllm/NAME --llm-arg api_base=http://localhost:8000/v1. "
            f"Or set {MODEL_ENV}=MODEL. To see the whole loop offline, with no GPU and no key, "
            f"run the recorded demo:\n  {DEMO_COMMAND}")


class RunSettings(BaseModel):
    """Knobs shared by refinement and sampling runs."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str | None = Field(default=None, description=(
        f"litellm model string, `replay:FILE.jsonl` or `replay:RUN_DIR`; None = ${MODEL_ENV}."))
    problems: str = Field(
        default="suite:level1", description="Problem spec (problems.spec.select).")
    backend: Backend | None = Field(
        default=None, description="Kernel backend; None = cuda when a GPU is visible, else cpp.")
    size: str | None = Field(default=None, description="Problem size preset (e.g. `small`).")
    temperature: float | None = Field(
        default=None, description="Sampling temperature; None = provider default.")
    concurrency: int = Field(
        default=8, ge=1, description="Concurrent LLM calls (and trajectories in flight).")
    out: Path = Field(default=Path("runs"), description="Root folder of run directories.")
    resume: Path | None = Field(
        default=None, description="Run directory to continue; its stored settings win.")
    llm_args: dict[str, Any] = Field(
        default_factory=dict, description="Provider options passed through to litellm.")
    seed: int | None = Field(
        default=None, description="Sampling seed passed to the provider (where supported).")
    name: str | None = Field(
        default=None, description="Run name in the directory name; None = derived from the model.")
    hardware: bool = Field(default=False, description="Add the hardware-spec block to prompts.")
    log_format: Literal["console", "json"] = Field(default="console", description="Log rendering.")
    noise_margin: float = Field(default=0.07, ge=0.0, description=(
        "Least relative runtime gain a new best-so-far needs; the evaluator's measured noise "
        "is used instead when it is larger. The default is the between-process spread measured "
        "for one unchanged kernel on an H200 (6.9 percent, docs/gpu-validation.md): the evaluator's "
        "within-process noise alone underestimates it."))
    eval_options: dict[str, Any] = Field(default_factory=dict, description=(
        "feedback.options.EvalOptions overrides (timing_trials, tolerance, device...); size and "
        "profile come from --size and the feedback mode."))
    llm_timeout_s: float = Field(default=600.0, gt=0, description="Per-request LLM timeout.")
    executor: Executor = Field(default="local", description=(
        "Where evaluations run: `local` (this machine) or `ray` (a Ray cluster: compiles as CPU "
        "tasks, correctness/timing on one-GPU actors; docs/scaling.md)."))
    ray_address: str | None = Field(default=None, description=(
        "Ray cluster for --executor ray: `auto` or HOST:PORT; None = Ray's own choice "
        "(RAY_ADDRESS, else the cluster last started here, else a new local Ray)."))

    def resolved(self) -> RunSettings:
        """A copy with the model, backend and name decided (raises MissingModelError)."""
        model = self.model or os.environ.get(MODEL_ENV)
        if not model:
            raise MissingModelError()
        backend = self.backend
        if backend is None:
            import torch

            backend = "cuda" if torch.cuda.is_available() else "cpp"
        name = self.name or _slug(model)
        return self.model_copy(update={"model": model, "backend": backend, "name": name})


    @model_validator(mode="after")
    def _usable_executor(self) -> RunSettings:
        from feedback.executor import check_executor

        check_executor(self.executor, self.ray_address)  # Ray missing fails before any run
        return self

    @field_validator("eval_options")
    @classmethod
    def _known_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        from feedback.options import EvalOptions
        from problems.cli import user_error

        try:
            EvalOptions(**value)  # unknown names and bad values fail here, before any run starts
        except ValidationError as e:  # one line per option, not pydantic's text
            fields = EvalOptions.model_fields
            raise ValueError(user_error(e, flags=str, known=fields)) from None
        return value


class RefineSettings(RunSettings):
    """Multi-turn refinement: generate -> compile -> correct -> perform -> feedback, N turns."""

    feedback: str = Field(default="G+E+P", description="Feedback mode: `G`, `G+E` or `G+E+P`.")
    turns: int = Field(default=10, ge=1, description="Turns (LLM calls) per trajectory.")
    history: Literal["last", "all"] = Field(
        default="last", description="Earlier turns shown to the model.")
    trajectories: int = Field(default=1, ge=1, description="Independent trajectories per problem.")
    target_speedup: float | None = Field(default=None, gt=0, description=(
        "Stop a trajectory early once its best kernel reaches this speedup over eager."))

    @field_validator("feedback")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        from agent.conversation import FeedbackMode

        return str(FeedbackMode.parse(value))


class SampleSettings(RunSettings):
    """Repeated sampling: k independent one-shot samples per problem."""

    k: int = Field(default=10, ge=1, description="Samples per problem.")
    temperature: float | None = Field(default=0.7, description="Sampling temperature.")


def _slug(model: str) -> str:
    """A file-name-safe short form of the model string (`openai/gpt-4o` -> `gpt-4o`)."""
    tail = model.rstrip("/").split("/")[-1].split(":")[-1]
    tail = Path(tail).stem if model.startswith("replay:") else tail
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail)[:40] or "run"
