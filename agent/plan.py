"""The plan of a run (`--dry-run`): what it would do and the most it could spend, calling nothing.

Calls are exact (problems x trajectories x turns, or problems x k). Tokens are bounded per call by
the model's context window and its output limit (`--llm-arg max_tokens` wins) as litellm's table
knows them; where the table does not know a model the bound is unknown, never guessed. The first
turn's prompts are counted exactly (later turns add the previous code and its feedback).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.settings import RefineSettings, RunSettings, SampleSettings
from problems.record import Problem


@dataclass(frozen=True)
class RunPlan:
    """One run's shape and its spending bounds (None = not known for this model)."""

    mode: str
    model: str
    backend: str
    problems: tuple[str, ...]
    per_problem: int
    """Trajectories (refine) or samples k (sample) per problem."""
    turns: int
    first_prompt_tokens: int
    """Prompt tokens of every trajectory's first call, counted with the model's tokenizer."""
    max_input_tokens: int | None
    max_output_tokens: int | None
    input_usd_per_token: float | None
    output_usd_per_token: float | None
    evaluator: dict[str, Any]

    @property
    def calls(self) -> int:
        """The most LLM calls: every turn of every trajectory (early stops only save)."""
        return len(self.problems) * self.per_problem * self.turns

    @property
    def max_tokens(self) -> int | None:
        if self.max_input_tokens is None or self.max_output_tokens is None:
            return None
        return self.calls * (self.max_input_tokens + self.max_output_tokens)

    @property
    def max_usd(self) -> float | None:
        rates = (self.input_usd_per_token, self.output_usd_per_token)
        if self.max_tokens is None or None in rates:
            return None
        return self.calls * (self.max_input_tokens * rates[0] + self.max_output_tokens * rates[1])


def plan_run(settings: RunSettings, problems: list[Problem]) -> RunPlan:
    """The plan of resolved SETTINGS over PROBLEMS."""
    from agent.conversation import build_messages
    from agent.llm import count_tokens, model_facts

    refine = isinstance(settings, RefineSettings)
    facts = model_facts(settings.model, settings.llm_args)
    args = settings.llm_args
    out_cap = args.get("max_tokens") or args.get("max_completion_tokens") or facts.max_output_tokens
    per_problem = settings.trajectories if refine else settings.k
    first = sum(count_tokens(settings.model, build_messages(
        p, settings.backend, [], settings.feedback if refine else "G")) for p in problems)
    evaluator = {"executor": settings.executor, "size": settings.size or "default",
                 "profile": refine and "P" in settings.feedback, **settings.eval_options}
    return RunPlan(
        mode="refine" if refine else "sample", model=settings.model, backend=settings.backend,
        problems=tuple(p.id for p in problems), per_problem=per_problem,
        turns=settings.turns if refine else 1, first_prompt_tokens=first * per_problem,
        max_input_tokens=facts.max_input_tokens, max_output_tokens=out_cap,
        input_usd_per_token=facts.input_usd_per_token,
        output_usd_per_token=facts.output_usd_per_token, evaluator=evaluator)


def describe(plan: RunPlan, settings: RunSettings) -> list[str]:
    """The plan as lines for a person."""
    shown = ", ".join(plan.problems[:8]) + (f", ... ({len(plan.problems)} in all)"
                                            if len(plan.problems) > 8 else "")
    unit = "trajectories" if plan.mode == "refine" else "samples (k)"
    lines = [f"plan ({plan.mode}, nothing is called):",
             f"  model        {plan.model}",
             f"  backend      {plan.backend}",
             f"  problems     {len(plan.problems)}: {shown}",
             f"  {unit:<12} {plan.per_problem} per problem"]
    if isinstance(settings, RefineSettings):
        lines.append(f"  turns        {plan.turns} (feedback {settings.feedback}, history "
                     f"{settings.history})")
    elif isinstance(settings, SampleSettings):
        lines.append(f"  temperature  {settings.temperature}")
    per_call = (f"{plan.max_input_tokens} in + {plan.max_output_tokens} out per call"
                if plan.max_tokens is not None else "the model's limits are not in litellm's "
                "table; --llm-arg max_tokens=N bounds the output")
    most = plan.max_tokens if plan.max_tokens is not None else "unknown"
    usd = f"{plan.max_usd:.2f}" if plan.max_usd is not None else "unknown (no price known)"
    if plan.model.startswith("replay:"):
        per_call, most, usd = "replayed: nothing is sent", 0, "0 (replayed)"
    lines += [f"  LLM calls    at most {plan.calls}",
              (f"  tokens       first turn {plan.first_prompt_tokens} prompt tokens in all; "
              f"billed at most {most} ({per_call})"),
              f"  dollars      at most {usd}",
              "  evaluator    " + ", ".join(f"{k}={v}" for k, v in plan.evaluator.items())]
    return lines
