"""The graph's state: one trajectory of one problem, as a TypedDict of records.

Everything here is checkpointed after every node, so a killed run resumes at the last finished
step: a generated candidate is never re-billed, a stored attempt is never re-evaluated.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from agent.records import Attempt, Candidate
from feedback.result import EvalResult
from problems.record import Problem


class State(TypedDict):
    """The whole state of one trajectory (start it with `initial_state`)."""

    problem: Problem
    """The reference program to speed up."""
    index: int
    """Trajectory index (refinement) or sample index (sampling)."""
    turn: int
    """The turn being worked on (0-based); equals the number of finished attempts."""
    candidate: Candidate | None
    """This turn's response and extracted code (None between turns)."""
    result: EvalResult | None
    """This turn's evaluation so far: each stage replaces it; `ok` = passed so far."""
    from_store: bool
    """True when this turn's attempt was already in the run store (resume): not evaluated again."""
    device_seconds: float
    """Wall time of this turn's correctness and timing stages."""
    history: Annotated[list[Attempt], operator.add]
    """Finished attempts, in turn order (appended by the feedback node)."""
    best: int | None
    """Index into `history` of the best-so-far (correct, fastest beyond noise)."""
    best_per_turn: Annotated[list[int | None], operator.add]
    """`best` after each finished turn."""


def initial_state(problem: Problem, index: int) -> State:
    """The state a fresh trajectory starts in."""
    return State(problem=problem, index=index, turn=0, candidate=None, result=None,
                 from_store=False, device_seconds=0.0, history=[], best=None, best_per_turn=[])
