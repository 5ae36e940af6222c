"""The concurrent driver: every (problem, trajectory) of a run through the graph, resumably.

`execute()` is what `agent.refine.run` and `agent.sample.run` call: it resolves the settings (or
reloads a stored run's), creates the run directory, builds the LLM client and the evaluator
(unless injected), and drives all trajectories concurrently under one SQLite checkpointer. One
trajectory failing (an LLM error, a bug) is logged and ends that trajectory only.
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import aiosqlite
import structlog
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agent.context import Context
from agent.gates import EvalGates, GateStats
from agent.graph import make_graph, recursion_limit
from agent.logs import bind_trajectory, logging_to
from agent.preflight import preflight
from agent.progress import RunProgress
from agent.provenance import hardware_facts, make_record
from agent.settings import RefineSettings, RunSettings, SampleSettings
from agent.state import initial_state
from agent.store import CHECKPOINTS, LOG, RunStore, checkpoint_types, new_run_dir
from feedback.job import standby_workers
from feedback.options import EvalOptions
from problems.record import Problem

log = structlog.get_logger("agent.runner")
Mode = Literal["refine", "sample"]
PER_SESSION = ("resume", "concurrency", "log_format", "executor", "ray_address")
"""Settings a resume takes from its own invocation, not the stored run: how and where it runs
(a run started on one machine may be finished on a Ray cluster), never what it measures."""


@dataclass
class Outcome:
    """How a run ended: where it is stored, and which trajectories failed (and why)."""

    path: Path
    settings: RunSettings
    problems: list[Problem]
    failed: dict[str, str] = field(default_factory=dict)
    gates: dict[str, GateStats] = field(default_factory=dict)
    """The scheduler's account of each evaluator gate (`agent.gates`): calls, busy, waits."""


def _turns(settings: RunSettings) -> int:
    return settings.turns if isinstance(settings, RefineSettings) else 1


def _indices(settings: RunSettings) -> int:
    return settings.k if isinstance(settings, SampleSettings) else settings.trajectories


def run_settings(settings: RunSettings, mode: Mode) -> RunSettings:
    """The settings a run would use: a resumed run's stored ones (with this session's
    `PER_SESSION` settings), else SETTINGS resolved; creates nothing."""
    if settings.resume is None:
        return settings.resolved()
    record = RunStore.open(settings.resume).record()
    if record.mode != mode:
        raise ValueError(f"{settings.resume} is a {record.mode} run, not a {mode} run")
    return type(settings).model_validate(
        {**record.config, **{name: getattr(settings, name) for name in PER_SESSION}})


def _open(settings: RunSettings, mode: Mode, *, check_model: bool = True,
          check_toolchain: bool = True) -> tuple[RunSettings, RunStore, list[Problem]]:
    """Reload a stored run (its settings win) or create a new run directory.

    The preflight runs first (`agent.preflight`), so a missing key, toolchain or problem fails
    before anything is created or stored. CHECK_MODEL / CHECK_TOOLCHAIN are off for an
    injected LLM client / evaluator.
    """
    from prompts import template_hashes

    checks = {"model": check_model, "toolchain": check_toolchain}
    if settings.resume is not None:
        stored = run_settings(settings, mode)
        found = preflight(stored, **checks, writable=stored.resume).raise_failures()
        return stored, RunStore.open(stored.resume), found.problems
    settings = settings.resolved()
    problems = preflight(settings, **checks).raise_failures().problems
    path = new_run_dir(settings.out, f"{mode}_{settings.name}")
    record = make_record(path.name, mode, settings.model_dump(mode="json"), template_hashes())
    return settings, RunStore.create(path, record), problems


def _context(settings: RunSettings, store: RunStore, llm, evaluator) -> Context:
    from agent.conversation import FeedbackMode
    from prompts import template_set_hash

    refine = isinstance(settings, RefineSettings)
    mode = FeedbackMode.parse(settings.feedback if refine else "G")
    llm_args = dict(settings.llm_args)
    if settings.seed is not None:
        llm_args.setdefault("seed", settings.seed)
    if llm is None:
        from agent.llm import make_client

        llm = make_client(settings.model, llm_args=llm_args, concurrency=settings.concurrency,
                          timeout_s=settings.llm_timeout_s)
    if evaluator is None:
        from feedback.executor import make_evaluator

        evaluator = make_evaluator(settings.executor, settings.ray_address)
    options = EvalOptions(**{**settings.eval_options, "size": settings.size,
                             "profile": refine and mode.profile})
    return Context(
        run_id=store.record().run_id, model=settings.model, backend=settings.backend,
        turns=_turns(settings), feedback=mode, history=getattr(settings, "history", "last"),
        temperature=settings.temperature,
        hardware=hardware_facts(settings.backend) if settings.hardware else None,
        target_speedup=getattr(settings, "target_speedup", None),
        noise_margin=settings.noise_margin, template_hash=template_set_hash(),
        options=options, llm=llm, evaluator=evaluator, store=store)


async def run_trajectory(graph, ctx: Context, problem: Problem, index: int,
                         progress: RunProgress) -> None:
    """Drive one trajectory to its end, continuing from its checkpoint when there is one."""
    bind_trajectory(ctx.run_id, problem.id, index)
    config = {"configurable": {"thread_id": f"{ctx.run_id}/{problem.id}/{index}"},
              "recursion_limit": recursion_limit(ctx.turns)}
    snapshot = await graph.aget_state(config)
    if snapshot.values and not snapshot.next and not snapshot.tasks:
        return  # finished before
    # (a step whose writes were saved but not yet its checkpoint has no `next` but one task:
    # LangGraph applies those writes on resume and carries on)
    done = len(snapshot.values.get("history", [])) if snapshot.values else 0
    label = f"{problem.id}#{index}"
    task = progress.start(label, ctx.turns, done)
    start = None if snapshot.values else initial_state(problem, index)
    try:
        async for update in graph.astream(start, config, context=ctx, stream_mode="values",
                                          durability="sync"):
            if len(update["history"]) > done:
                done = len(update["history"])
                best = update["best"]
                progress.attempt(task, label, update["history"][-1],
                                 update["history"][best] if best is not None else None)
    finally:
        progress.finish(task)


async def drive(graph, ctx: Context, jobs: list[tuple[Problem, int]], limit: int,
                progress: RunProgress) -> dict[str, str]:
    """Run all trajectories, at most `limit` at a time; return the failed ones with the error."""
    gate = asyncio.Semaphore(limit)
    failed: dict[str, str] = {}

    async def one(problem: Problem, index: int) -> None:
        async with gate:
            try:
                await run_trajectory(graph, ctx, problem, index, progress)
            except Exception as e:  # noqa: BLE001 - one broken trajectory must not stop the others
                failed[f"{problem.id}#{index}"] = f"{type(e).__name__}: {e}"
                log.error("trajectory ended by an error; a resume retries it",
                          error=f"{type(e).__name__}: {e}")

    await asyncio.gather(*(one(p, i) for p, i in jobs))
    return failed


def execute(settings: RunSettings, mode: Mode, *, llm=None, evaluator=None,
            gates: EvalGates | None = None, show_progress: bool | None = None) -> Outcome:
    """Run (or resume) a refinement or sampling run; see `agent.refine.run`.

    `llm`, `evaluator` and `gates` replace the ones the settings would make (tests, benchmarks:
    `gates` with other compile slots, or tracing). The gates' clock starts when they are made:
    the run's own just before the first trajectory, injected ones wherever the caller made them.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asked = settings
    settings, store, problems = _open(settings, mode, check_model=llm is None,
                                      check_toolchain=evaluator is None)
    with logging_to(settings.log_format, store.path / LOG):
        if asked.resume is not None:
            _warn_on_resume(asked, settings, store)
        ctx = _context(settings, store, llm, evaluator)
        jobs = [(p, i) for p in problems for i in range(_indices(settings))]
        remaining = len(jobs) * ctx.turns - len(store.done_keys())
        log.info("run resumed" if asked.resume else "run started", run=ctx.run_id,
                 path=str(store.path), model=settings.model, backend=settings.backend,
                 problems=len(problems), trajectories=len(jobs), turns=ctx.turns)

        stats: dict[str, GateStats] = {}

        async def main() -> dict[str, str]:
            ctx.gates = gates or make_gates(settings.backend, ctx.evaluator)
            serde = JsonPlusSerializer(allowed_msgpack_modules=checkpoint_types())
            async with aiosqlite.connect(str(store.path / CHECKPOINTS)) as conn:
                await _no_fsync_per_step(conn)
                saver = AsyncSqliteSaver(conn, serde=serde)
                enabled = sys.stderr.isatty() if show_progress is None else show_progress
                with RunProgress(max(remaining, 0), enabled=enabled) as progress:
                    failed = await drive(make_graph(saver), ctx, jobs, settings.concurrency,
                                         progress)
            stats.update(ctx.gates.stats())
            ctx.gates.close()
            return failed

        try:
            with standby_workers():  # GPU stages: each worker process starts ahead of its job
                failed = asyncio.run(main())
        except KeyboardInterrupt:
            log.warning("interrupted: finished attempts are stored",
                        resume=f"--resume {store.path}")
            raise
        finally:
            if evaluator is None and hasattr(ctx.evaluator, "close"):
                ctx.evaluator.close()  # the executor this run made (a Ray one: its actors)
        log.info("run finished", run=ctx.run_id, failed=len(failed), path=str(store.path))
        log.info("scheduler", **_gate_fields(stats))
    return Outcome(path=store.path, settings=settings, problems=problems, failed=failed,
                   gates=stats)


def make_gates(backend: str, evaluator) -> EvalGates:
    """The run's gates: this host's (a CPU per compile, a device gate), or, for an evaluator
    that runs the stages elsewhere and says how much it takes at once (`admission`, the Ray
    executor), that many compiles and correctness/timing jobs."""
    admission = getattr(evaluator, "admission", None)
    if admission is None:
        return EvalGates(backend)
    slots = admission(backend)
    return EvalGates(backend, slots.compile_slots, device_slots=slots.device_slots, remote=True)


async def _no_fsync_per_step(conn: aiosqlite.Connection) -> None:
    """WAL with synchronous=NORMAL: a checkpoint commit no longer waits for the disk (an fsync
    per graph step, 1.5-2.5 ms each on the 2-core machine, serialised for all trajectories behind
    the one connection). A killed process loses nothing (committed pages are in the OS cache);
    a power loss may lose the last checkpoints, never corrupt the file, and a resume then redoes
    those steps, taking finished attempts from attempts.sqlite (which keeps full sync)."""
    await conn.execute("PRAGMA journal_mode=WAL")
    await conn.execute("PRAGMA synchronous=NORMAL")


def _gate_fields(stats: dict[str, GateStats]) -> dict[str, float | int | None]:
    """One flat log line: wall time, then per gate calls, busy share, busy and wait seconds."""
    fields: dict[str, float | int | None] = {}
    for name, s in stats.items():
        fields["wall_s"] = round(s.wall_s, 2)
        share = s.busy_share
        fields.update({f"{name}_calls": s.calls, f"{name}_busy_s": round(s.busy_s, 2),
                       f"{name}_busy_share": round(share, 3) if share is not None else None,
                       f"{name}_wait_s": round(s.wait_s, 2)})
    return fields


def _warn_on_resume(asked: RunSettings, stored: RunSettings, store: RunStore) -> None:
    """Say what a resume does not apply (given settings that differ from the stored ones), and
    whether the prompt templates changed since the run started (later turns would differ)."""
    from prompts import template_hashes

    ignored = {name: getattr(asked, name) for name in asked.model_fields_set
               if name not in PER_SESSION
               and getattr(asked, name) != getattr(stored, name)}
    if ignored:
        log.warning("resume keeps the run's stored settings; ignored", **{
            k: str(v) for k, v in ignored.items()})
    changed = sorted(set(template_hashes().items()) ^ set(store.record().template_hashes.items()))
    if changed:
        log.warning("prompt templates changed since the run started; new turns use the current "
                    "ones", templates=sorted({name for name, _ in changed}))
