"""The refinement loop as a LangGraph `StateGraph`.

    generate -> compile -> correct -> perform -> feedback -> (generate | END)

Any failing stage, and a response without code, jumps straight to `feedback`, which records the
attempt (in the run store, at once) and moves the best-so-far; the router then starts the next
turn or ends after `turns` turns, or early once the target speedup is reached. The LLM client and
the evaluator come from the context (`agent.context.Context`); blocking evaluator calls run in
worker threads so many trajectories proceed concurrently.
"""

from __future__ import annotations

import asyncio
import time
from typing import Literal

import structlog
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from agent.context import Context
from agent.conversation import build_messages
from agent.extract import extract_code
from agent.records import Attempt, Candidate, improves
from agent.replay import ReplayKey
from agent.state import State
from feedback.result import EvalResult

log = structlog.get_logger("agent.graph")


async def generate(state: State, runtime: Runtime[Context]) -> dict:
    """Ask the model for this turn's kernel (or take it from the store when resuming)."""
    ctx, problem, index, turn = runtime.context, state["problem"], state["index"], state["turn"]
    stored = await asyncio.to_thread(ctx.store.attempt, problem.id, index, turn)
    if stored is not None:
        log.info("already stored, not redone", turn=turn)
        return {"candidate": stored.candidate, "result": stored.result, "from_store": True,
                "device_seconds": stored.gpu_seconds}
    messages = build_messages(problem, ctx.backend, state["history"], ctx.feedback, ctx.history,
                              hardware=ctx.hardware)
    completion = await ctx.llm.complete(messages, key=ReplayKey(problem.id, index, turn),
                                        temperature=ctx.temperature)
    candidate = Candidate(
        problem_id=problem.id, run_id=ctx.run_id, index=index, turn=turn, model=ctx.model,
        template_hash=ctx.template_hash, prompt=messages, response=completion.text,
        code=extract_code(completion.text), usage=completion.usage)
    return {"candidate": candidate, "result": None, "from_store": False, "device_seconds": 0.0}


async def _stage(stage: Literal["compile", "correct", "perform"], state: State,
                 runtime: Runtime[Context]) -> dict:
    """Run one evaluator stage in a worker thread, behind its gate."""
    ctx, problem, code = runtime.context, state["problem"], state["candidate"].code
    args = (problem, code, ctx.backend, ctx.options)
    if stage != "compile":
        args += (state["result"],)
    call = getattr(ctx.evaluator, stage)

    def timed() -> tuple[EvalResult, float]:  # the stage's own seconds, not its wait at the gate
        start = time.perf_counter()
        return call(*args), time.perf_counter() - start

    key = (problem.id, state["index"], state["turn"])
    result, spent = await (ctx.gates.run(stage, key, timed) if ctx.gates
                           else asyncio.to_thread(timed))
    update: dict = {"result": result}
    if stage != "compile":
        update["device_seconds"] = state["device_seconds"] + spent
    return update


async def compile_candidate(state: State, runtime: Runtime[Context]) -> dict:
    """Static screen and build."""
    return await _stage("compile", state, runtime)


async def check_correctness(state: State, runtime: Runtime[Context]) -> dict:
    """Compare against the reference on fresh inputs."""
    return await _stage("correct", state, runtime)


async def measure_performance(state: State, runtime: Runtime[Context]) -> dict:
    """Time (and, for P feedback, profile) the candidate and the baselines."""
    return await _stage("perform", state, runtime)


async def record_feedback(state: State, runtime: Runtime[Context]) -> dict:
    """Store the finished attempt, move the best-so-far, and advance the turn."""
    ctx, turn = runtime.context, state["turn"]
    attempt = Attempt(candidate=state["candidate"], result=state["result"],
                      gpu_seconds=state["device_seconds"])
    if not state["from_store"]:
        # Not replacing: a process killed after this write but before this step's writes were
        # saved re-runs this node on resume, and the attempt stored then stands.
        await asyncio.to_thread(ctx.store.write_attempt, attempt, replace=False)
    best = state["best"]
    if improves(attempt, state["history"][best] if best is not None else None, ctx.noise_margin):
        best = len(state["history"])
    result: EvalResult | None = attempt.result
    speedup = result.speedup_eager if result else None
    log.info("attempt", turn=turn, status=result.status.value if result else "no_code",
             speedup=round(speedup, 3) if speedup is not None else None,
             new_best=best == len(state["history"]),
             message=_headline(result.message) if result else "no code block defining ModelNew")
    return {"history": [attempt], "best": best, "best_per_turn": [best], "turn": turn + 1,
            "candidate": None, "result": None, "from_store": False, "device_seconds": 0.0}


def _headline(message: str) -> str | None:
    """The line of an evaluator message worth a log line: the compiler's first `error:` line,
    else the first line naming an error, else the first line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for marker in (": error: ", "error"):
        found = next((line for line in lines if marker in line.lower()), None)
        if found:
            return found[:200]
    return lines[0][:200] if lines else None


def _passed(state: State) -> bool:
    return state["result"] is not None and state["result"].correct


def route_generated(state: State) -> Literal["compile", "feedback"]:
    """Evaluate the code, or go straight to feedback (no code, or already stored)."""
    if state["from_store"] or state["candidate"].code is None:
        return "feedback"
    return "compile"


def route_compiled(state: State) -> Literal["correct", "feedback"]:
    return "correct" if _passed(state) else "feedback"


def route_checked(state: State) -> Literal["perform", "feedback"]:
    return "perform" if _passed(state) else "feedback"


def route_next(state: State, runtime: Runtime[Context]) -> Literal["generate", "__end__"]:
    """Next turn, or the end: after `turns` turns, or once the best reaches the target speedup."""
    ctx = runtime.context
    if state["turn"] >= ctx.turns:
        return END
    best = state["best"]
    if ctx.target_speedup is not None and best is not None:
        speedup = state["history"][best].result.speedup_eager
        if speedup is not None and speedup >= ctx.target_speedup:
            return END
    return "generate"


def make_graph(checkpointer=None):
    """The compiled graph; pass a checkpointer to make trajectories resumable."""
    builder = StateGraph(State, context_schema=Context)
    builder.add_node("generate", generate)
    builder.add_node("compile", compile_candidate)
    builder.add_node("correct", check_correctness)
    builder.add_node("perform", measure_performance)
    builder.add_node("feedback", record_feedback)
    builder.add_edge(START, "generate")
    builder.add_conditional_edges("generate", route_generated)
    builder.add_conditional_edges("compile", route_compiled)
    builder.add_conditional_edges("correct", route_checked)
    builder.add_edge("perform", "feedback")
    builder.add_conditional_edges("feedback", route_next)
    return builder.compile(checkpointer=checkpointer, name="kernel-refine")


def recursion_limit(turns: int) -> int:
    """LangGraph's step limit for a trajectory of `turns` turns (5 nodes a turn, plus slack)."""
    return 5 * turns + 10
