"""The graph's context schema: run settings and injected dependencies (LangGraph `Runtime.context`).

The context is the same for every trajectory of a run and is never checkpointed, so it may hold
live objects: the LLM client, the evaluator, the run store. The graph module imports neither
litellm nor anything that starts processes; whoever builds a `Context` chooses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.conversation import FeedbackMode, HistoryPolicy
from agent.gates import EvalGates
from agent.store import RunStore
from feedback.api import Evaluator
from feedback.options import Backend, EvalOptions

if TYPE_CHECKING:
    from agent.llm import LLMClient


@dataclass(kw_only=True)
class Context:
    """Everything a trajectory needs besides its own state."""

    run_id: str = field(metadata={"description": "Run this trajectory belongs to."})
    model: str = field(metadata={"description": "Model string recorded on every candidate."})
    backend: Backend = field(metadata={"description": "Kernel backend asked for and evaluated."})
    turns: int = field(default=1, metadata={"description": "Turns per trajectory (1 = sampling)."})
    feedback: FeedbackMode = field(default=FeedbackMode.G_E_P, metadata={
        "description": "What a turn feeds back: G, G+E or G+E+P."})
    history: HistoryPolicy = field(default="last", metadata={
        "description": "Which earlier attempts the prompt shows."})
    temperature: float | None = field(default=None, metadata={
        "description": "Sampling temperature."})
    hardware: dict[str, Any] | None = field(default=None, metadata={
        "description": "Hardware facts for the task prompt, or None."})
    target_speedup: float | None = field(default=None, metadata={
        "description": "End a trajectory once its best reaches this speedup over eager."})
    noise_margin: float = field(default=0.0, metadata={
        "description": "Least relative gain of a new best (measured noise wins when larger)."})
    template_hash: str = field(default="", metadata={
        "description": "Hash of the prompt templates."})
    options: EvalOptions = field(default_factory=EvalOptions, metadata={
        "description": "Evaluation options (size, profile for P feedback, trials...)."})
    llm: LLMClient = field(metadata={"description": "Injected LLM client (or replay)."})
    evaluator: Evaluator = field(metadata={
        "description": "Injected evaluator (compile/correct/perform)."})
    store: RunStore = field(metadata={
        "description": "Where finished attempts are written at once."})
    gates: EvalGates | None = field(default=None, metadata={
        "description": "Admission to evaluator stages; None = no throttling."})
