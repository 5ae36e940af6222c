"""What a run actually spent: LLM calls, tokens, dollars and evaluation (GPU) seconds.

Budgets are counted from the stored attempts, never from the configuration, so a sweep's
"refinement N turns vs sampling k = N" comparison shows what each really cost. A dollar figure is
None as soon as one counted call has no price: an unknown cost is not a zero cost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agent.records import Attempt
from experiments.metrics import Grid, Layout


@dataclass(frozen=True)
class Budget:
    """Spend of a set of attempts (or a per-trajectory mean of it, then fractional)."""

    calls: float
    prompt_tokens: float
    completion_tokens: float
    dollars: float | None
    unpriced_calls: int
    gpu_seconds: float

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    @property
    def dollars_text(self) -> str:
        """The dollar figure for a table: unknown prices are said, never shown as zero."""
        if self.dollars is None:
            return f"unknown ({self.unpriced_calls} unpriced calls)"
        return f"{self.dollars:.4f}"


def spend(attempts: Iterable[Attempt]) -> Budget:
    """Sum of the calls, tokens, dollars and GPU-seconds of these attempts."""
    calls = prompt = completion = unpriced = 0
    dollars, gpu = 0.0, 0.0
    for a in attempts:
        usage = a.candidate.usage
        calls += 1
        prompt += usage.prompt_tokens
        completion += usage.completion_tokens
        if usage.cost_usd is None:
            unpriced += 1
        else:
            dollars += usage.cost_usd
        gpu += a.gpu_seconds
    return Budget(calls, prompt, completion, None if unpriced else dollars, unpriced, gpu)


def _scaled(total: Budget, factor: float) -> Budget:
    return Budget(total.calls * factor, total.prompt_tokens * factor,
                  total.completion_tokens * factor,
                  None if total.dollars is None else total.dollars * factor,
                  total.unpriced_calls, total.gpu_seconds * factor)


def budget_at(grid: Grid, layout: Layout, n: int) -> Budget:
    """Mean spend of one trajectory up to N turns (refine) or of k = n samples (sample).

    This is the budget behind fast_p@N (one trajectory of N calls) and fast_p@k (k calls), so the
    two can share an x axis. Attempts never made cost nothing.
    """
    if layout.mode == "refine":
        keys = [(p, i, t) for p in layout.problems for i in range(layout.indices)
                for t in range(min(n, layout.turns))]
        slots = len(layout.problems) * layout.indices
    else:
        keys = [(p, i, 0) for p in layout.problems for i in range(layout.indices)]
        slots = len(layout.problems) * layout.indices / n
    total = spend(grid[k] for k in keys if k in grid)
    return _scaled(total, 1.0 / slots) if slots else _scaled(total, 0.0)
