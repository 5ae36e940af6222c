"""The messages sent to the model at each turn: task first, then what it made and how it fared.

Turn 0 is `[system, task]`. A later turn adds, for the last attempt (history `last`, the paper's
setting) or for every attempt (history `all`), an assistant message holding the previous
generation and a user message with the feedback that the mode allows:

- `G`: the previous code only (the extracted code, not the raw response, whose reasoning can run
  to many thousands of tokens), and a request for a better version; no evaluation text.
- `G+E`: the same, plus the evaluation: compiler / runtime / mismatch / timing text.
- `G+E+P`: the same, plus the profiler tables, for attempts whose result has profiles.

The user message of an attempt does not depend on whether it is the last, so under `all` each
turn's messages extend the previous turn's (prompt caches can reuse them).

An attempt without extracted code has no code to show: its assistant message holds the raw
response (clipped), and in every mode the user message says that no code block defining
`ModelNew` was found: that is a fact about the generation, not an evaluation. E modes add the
`no_code` feedback (nothing was evaluated; the format to use).
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from agent.records import Attempt
from feedback.result import EvalResult, Status
from problems.record import Problem
from prompts import render

BACKENDS = ("cuda", "triton", "cpp")
HistoryPolicy = Literal["last", "all"]


class FeedbackMode(str, Enum):
    """What a refinement turn feeds back: Generation, Evaluation, Profile."""

    G = "G"
    G_E = "G+E"
    G_E_P = "G+E+P"

    @classmethod
    def parse(cls, text: str | FeedbackMode) -> FeedbackMode:
        """`"G"`, `"G+E"`, `"G+E+P"` (any case, spaces ignored); a clear ValueError otherwise."""
        if isinstance(text, FeedbackMode):
            return text
        canonical = str(text).replace(" ", "").upper()
        for mode in cls:
            if mode.value == canonical:
                return mode
        raise ValueError(f"unknown feedback mode {text!r}; expected one of "
                         f"{', '.join(m.value for m in cls)}")

    def __str__(self) -> str:  # "G+E", not "FeedbackMode.G_E", wherever it is printed or stored
        return self.value

    @property
    def evaluation(self) -> bool:
        return self is not FeedbackMode.G

    @property
    def profile(self) -> bool:
        return self is FeedbackMode.G_E_P


def feedback_template(result: EvalResult | None) -> str:
    """The template that words RESULT (`feedback_no_code` when there was nothing to evaluate)."""
    if result is None:
        return "feedback_no_code"
    return "feedback_success" if result.status == Status.ok else f"feedback_{result.status.value}"


def evaluation_text(attempt: Attempt) -> str:
    """The E part for ATTEMPT: its evaluation in words."""
    if attempt.candidate.code is None:
        return render("feedback_no_code")
    if attempt.result is None:
        raise ValueError(f"attempt {attempt.candidate.problem_id} index {attempt.candidate.index} "
                         f"turn {attempt.candidate.turn} has code but no evaluation result")
    return render(feedback_template(attempt.result), result=attempt.result)


def profile_text(result: EvalResult | None) -> str | None:
    """The P part: the candidate's and the reference's profile tables; None without profiles."""
    if result is None or (result.profile is None and result.reference_profile is None):
        return None
    return render("profile", result=result)


def _turn_messages(attempt: Attempt, mode: FeedbackMode) -> list[dict[str, str]]:
    code = attempt.candidate.code
    previous = render("previous", code=code, response=attempt.candidate.response)
    feedback = render(
        "refine", code_found=code is not None,
        evaluation=evaluation_text(attempt) if mode.evaluation else None,
        profile=profile_text(attempt.result) if mode.profile else None)
    return [{"role": "assistant", "content": previous}, {"role": "user", "content": feedback}]


def build_messages(problem: Problem, backend: str, history: list[Attempt],
                   mode: FeedbackMode | str, history_policy: HistoryPolicy = "last",
                   hardware: dict | None = None) -> list[dict[str, str]]:
    """OpenAI-style messages for the next turn of a trajectory with HISTORY (oldest first).

    Args:
        backend: `cuda`, `triton` or `cpp`: which example and instructions the task shows.
        mode: `G`, `G+E` or `G+E+P`.
        history_policy: `last` feeds back the last attempt only; `all` every attempt in order.
        hardware: GPU facts for the task prompt (`name`, `sms`, `memory_bandwidth_gbs`,
            `peak_tflops`...), or None to leave the hardware block out.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if history_policy not in ("last", "all"):
        raise ValueError(f"unknown history policy {history_policy!r}; expected 'last' or 'all'")
    mode = FeedbackMode.parse(mode)
    messages = [
        {"role": "system", "content": render("system", backend=backend)},
        {"role": "user", "content": render("task", backend=backend, problem_source=problem.source,
                                           hardware=hardware)},
    ]
    shown = history[-1:] if history_policy == "last" else history
    for attempt in shown:
        messages.extend(_turn_messages(attempt, mode))
    return messages
