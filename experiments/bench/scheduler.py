"""Framework overhead per turn and GPU-busy share of a simulated sweep, through the real agent.

    python -m experiments.bench.scheduler [--problems 250 --turns 10 --concurrency 250 ...]
        [--llm-latency S --compile-s S --gpu-s S --compile-workers N] [--out FILE.json]

A sweep is one `agent.runner.execute` call, as a real run is: P synthetic problems (copies of
`suite:level1/19_relu` under ids of their own) x one trajectory x T turns, at most --concurrency
trajectories in flight, through the real LangGraph graph, SQLite checkpointer, run store, prompt
templates and LLM client (one warm-up call first, outside the run: loading litellm's tokenizer
is a one-off per process, not a per-turn cost). The model is `replay:` on a transcript written
here, sleeping `replay_latency_s` = --llm-latency per call; the evaluator is
`experiments.bench.simulated` (compile: a sleep; correctness and timing: real GPU work when there
is a GPU, else a sleep, labelled so); the gates are the run's `EvalGates` with --compile-workers
compile slots, traced.

Arms: `zero` (every cost 0, --zero-concurrency trajectories in flight, 1 by default: all that is
left is the framework's own time per turn, without queueing behind other trajectories) and
`costs` (the given costs and --concurrency: a sweep as it runs, queueing included).

Per turn (one stored attempt): wall = from the previous attempt's store write (turn 0: from its
LLM call) to its own. overhead = wall - LLM latency (the simulated sleep; --llm-jitter varies it
per call) - compile - GPU time (as the evaluator measured them) - waits at the gates (from the
gates' trace; reported apart).
Its parts: `llm_client` (the client's own time around the sleep: litellm, token counting),
`dispatch` (a gate held while the evaluator is not running: the hand-off to a worker thread),
`rest` (graph, checkpoints, store, prompts, logs, queueing for the event loop). Framework CPU per
turn = this process's CPU seconds over the run, less the evaluator's own, / turns.
GPU-busy share = `EvalGates.stats()["device"]`: union of the device gate's holds / wall since the
gates were made (just before the run started).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from experiments.bench.simulated import SimulatedEvaluator, candidate_code

TEMPLATE = "level1/19_relu.py"


@dataclass(frozen=True)
class Costs:
    llm_s: float
    compile_s: float
    gpu_s: float
    llm_jitter: float = 0.0
    """Each call's latency is drawn uniformly from llm_s * (1 +- llm_jitter) (seeded)."""


class TimedLLM:
    """The real client, with each call's start, end and simulated latency noted by its replay
    key. The client sleeps the latency's fixed part (`replay_latency_s`); a jittered part, when
    asked for, is slept here first."""

    def __init__(self, client, fixed_s: float, spread_s: float, seed: int = 0) -> None:
        self.client = client
        self.fixed_s = fixed_s
        self.spread_s = spread_s
        self._rng = random.Random(seed)
        self.spans: dict[tuple[str, int, int], tuple[float, float]] = {}
        self.latency: dict[tuple[str, int, int], float] = {}

    async def complete(self, messages, *, key, temperature=None):
        extra = self._rng.uniform(0.0, self.spread_s) if self.spread_s else 0.0
        start = time.monotonic()
        try:
            if extra:
                await asyncio.sleep(extra)
            return await self.client.complete(messages, key=key, temperature=temperature)
        finally:
            self.spans[tuple(key)] = (start, time.monotonic())
            self.latency[tuple(key)] = self.fixed_s + extra


def synthetic_problems(folder: Path, count: int) -> list[str]:
    """COUNT copies of the suite's ReLU problem as `level1/{n}_sim{n}.py`; their ids."""
    from problems.loaders import SUITE_ROOT

    source = (SUITE_ROOT / TEMPLATE).read_text()
    (folder / "level1").mkdir(parents=True, exist_ok=True)
    for n in range(1, count + 1):
        (folder / "level1" / f"{n}_sim{n}.py").write_text(source)
    return [f"level1/{n}_sim{n}" for n in range(1, count + 1)]


WARM_UP = ("warm-up", 0, 0)


def write_transcript(path: Path, problems: list[str], turns: int) -> Path:
    """A replay transcript: every turn of every problem answers with a candidate naming its key
    (and one entry, `WARM_UP`, for the call that loads litellm's tokenizer before the run)."""
    with path.open("w") as f:
        f.write(json.dumps({"problem": WARM_UP[0], "index": 0, "turn": 0, "response": "-"}) + "\n")
        for problem in problems:
            for turn in range(turns):
                code = candidate_code(problem, 0, turn)
                text = f"Turn {turn}: a fused kernel.\n```python\n{code}```\n"
                f.write(json.dumps({"problem": problem, "index": 0, "turn": turn,
                                    "response": text}) + "\n")
    return path


def run_arm(name: str, costs: Costs, args: argparse.Namespace, root: Path) -> dict:
    """One sweep through `execute`; its per-turn breakdown and the gates' own account."""
    from agent.gates import EvalGates
    from agent.llm import make_client
    from agent.runner import execute
    from agent.settings import RefineSettings
    from agent.store import RunStore

    folder = root / name
    problems = synthetic_problems(folder / "problems",
                                  args.zero_problems if name == "zero" else args.problems)
    model = f"replay:{write_transcript(folder / 'replay.jsonl', problems, args.turns)}"
    fixed = costs.llm_s * (1 - costs.llm_jitter)
    llm_args = {"replay_latency_s": fixed} if fixed else {}
    concurrency = args.zero_concurrency if name == "zero" else args.concurrency
    settings = RefineSettings(
        model=model, problems=str(folder / "problems"), backend="cuda", turns=args.turns,
        concurrency=concurrency, out=folder / "runs", feedback="G+E+P", llm_args=llm_args,
        name=f"scheduler-{name}", log_format=args.log_format)
    llm = TimedLLM(make_client(model, llm_args=llm_args, concurrency=concurrency), fixed,
                   2 * costs.llm_s * costs.llm_jitter)
    asyncio.run(llm.client.complete([{"role": "user", "content": "warm-up"}], key=WARM_UP))
    evaluator = SimulatedEvaluator(costs.compile_s, costs.gpu_s, device=args.device)
    unix_minus_mono = time.time() - time.monotonic()
    cpu, start = time.process_time(), time.monotonic()
    gates = EvalGates("cuda", cpu_slots=args.compile_workers, trace=True)
    outcome = execute(settings, "refine", llm=llm, evaluator=evaluator, gates=gates,
                      show_progress=False)
    wall, cpu = time.monotonic() - start, time.process_time() - cpu
    written = {k: w - unix_minus_mono for k, w in RunStore(outcome.path).written_at().items()}
    turns = per_turn(written, llm.spans, llm.latency, evaluator.calls, gates.calls)
    evaluator_cpu = sum(c.cpu_s for c in evaluator.calls)
    device = outcome.gates["device"]
    result = {
        "costs": vars(costs), "concurrency": concurrency, "gpu_work": evaluator.gpu_work,
        "run_dir": str(outcome.path), "failed": outcome.failed, "turns": len(turns),
        "wall_s": round(wall, 2),
        "turns_per_hour": round(len(turns) / wall * 3600) if wall else None,
        "framework_cpu_per_turn_s": _r((cpu - evaluator_cpu) / len(turns)) if turns else None,
        "overhead_s": _summary([t["overhead_s"] for t in turns]),
        "overhead_first_turn_s": _summary([t["overhead_s"] for t in turns if t["key"][2] == 0]),
        "overhead_later_turns_s": _summary([t["overhead_s"] for t in turns if t["key"][2] > 0]),
        "wait_s": _summary([t["wait_s"] for t in turns]),
        "turn_wall_s": _summary([t["wall_s"] for t in turns]),
        "overhead_parts_mean_s": {part: _r(statistics.fmean(t[part] for t in turns))
                                  for part in ("llm_client_s", "dispatch_s", "rest_s",
                                               "before_llm_s", "to_first_gate_s",
                                               "between_gates_s", "to_store_s")}
        if turns else {},
        "gates": {gate: stats.as_dict() for gate, stats in outcome.gates.items()},
        "gpu_busy_share": device.busy_share,
        "gpu_work_share": sum(c.end - c.start for c in evaluator.calls if c.stage != "compile")
        / device.wall_s if device.wall_s else None,
    }
    if args.per_turn:
        result["per_turn"] = [{k: v if k == "key" else _r(v) for k, v in t.items()}
                              for t in turns]
    return result


def per_turn(written: dict, llm_spans: dict, llm_latency: dict, stage_calls: list,
             gate_calls: list) -> list[dict]:
    """Each stored turn's wall time, split into the costs it was given, the waits at the gates
    and the framework's overhead (see the module docstring); all times on the monotonic clock."""
    work: dict[tuple, float] = {}
    for c in stage_calls:
        work[c.key] = work.get(c.key, 0.0) + (c.end - c.start)
    gates: dict[tuple, list] = {}
    for g in gate_calls:
        gates.setdefault(g.key, []).append(g)
    rows = []
    for key in sorted(written):
        problem, index, turn = key
        llm_start, llm_end = llm_spans[key]
        begin = written[(problem, index, turn - 1)] if turn else llm_start
        calls = sorted(gates.get(key, []), key=lambda g: g.requested)
        wait = sum(g.acquired - g.requested for g in calls)
        wall = written[key] - begin
        overhead = wall - llm_latency[key] - work.get(key, 0.0) - wait
        llm_client = (llm_end - llm_start) - llm_latency[key]
        dispatch = sum(g.released - g.acquired for g in calls) - work.get(key, 0.0)
        # the rest, by where it falls: before the LLM call, between the LLM call and each gate,
        # from the last stage to the store write
        marks = [llm_end] + [t for g in calls for t in (g.requested, g.released)] + [written[key]]
        gaps = [marks[i + 1] - marks[i] for i in range(0, len(marks) - 1, 2)]
        rows.append({"key": list(key), "wall_s": wall, "work_s": work.get(key, 0.0),
                     "wait_s": wait, "overhead_s": overhead, "llm_client_s": llm_client,
                     "dispatch_s": dispatch, "rest_s": overhead - llm_client - dispatch,
                     "before_llm_s": llm_start - begin, "to_first_gate_s": gaps[0],
                     "between_gates_s": sum(gaps[1:-1]), "to_store_s": gaps[-1]})
    return rows


def _r(x: float) -> float:
    return round(x, 4)


def _summary(values: list[float]) -> dict[str, float | int | None]:
    """n, median, p95 (nearest rank), mean and max."""
    if not values:
        return {"n": 0, "median": None, "p95": None, "mean": None, "max": None}
    xs = sorted(values)
    return {"n": len(xs), "median": _r(statistics.median(xs)),
            "p95": _r(xs[max(0, math.ceil(0.95 * len(xs)) - 1)]),
            "mean": _r(statistics.fmean(xs)), "max": _r(xs[-1])}


def markdown(result: dict) -> str:
    """One row per arm, then the overhead's parts."""
    lines = [("| arm | turns | wall s | turns/hour | overhead/turn median s | p95 s | "
              "framework CPU/turn s | gate wait/turn median s | GPU busy share |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for name, arm in result["arms"].items():
        share = arm["gpu_busy_share"]
        lines.append(
            f"| {name} | {arm['turns']} | {arm['wall_s']} | {arm['turns_per_hour']} | "
            f"{arm['overhead_s']['median']} | {arm['overhead_s']['p95']} | "
            f"{arm['framework_cpu_per_turn_s']} | {arm['wait_s']['median']} | "
            f"{'n/a' if share is None else f'{share:.3f}'} |")
    for name, arm in result["arms"].items():
        parts = ", ".join(f"{k[:-2]} {v}" for k, v in arm["overhead_parts_mean_s"].items())
        first, later = arm["overhead_first_turn_s"], arm["overhead_later_turns_s"]
        lines.append(f"\n{name}: overhead/turn median (p95) s: first turn {first['median']} "
                     f"({first['p95']}), later turns {later['median']} ({later['p95']})")
        lines.append(f"{name}: costs {arm['costs']}, concurrency {arm['concurrency']}; "
                     f"mean overhead parts (s): {parts}; GPU work: {arm['gpu_work']}; "
                     f"failed trajectories: {len(arm['failed'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=24, help="synthetic problems (sweep size)")
    parser.add_argument("--turns", type=int, default=3, help="turns per trajectory")
    parser.add_argument("--concurrency", type=int, default=24,
                        help="trajectories (and LLM calls) in flight (costs arm)")
    parser.add_argument("--zero-concurrency", type=int, default=1,
                        help="trajectories in flight in the zero arm")
    parser.add_argument("--zero-problems", type=int, default=8,
                        help="synthetic problems in the zero arm")
    parser.add_argument("--llm-latency", type=float, default=1.0, help="s per LLM call (costs arm)")
    parser.add_argument("--llm-jitter", type=float, default=0.0,
                        help="each LLM call takes llm-latency x (1 +- this), uniformly (costs arm)")
    parser.add_argument("--compile-s", type=float, default=0.2, help="s per compile (costs arm)")
    parser.add_argument("--gpu-s", type=float, default=0.05,
                        help="s per GPU stage, correctness and timing each (costs arm)")
    parser.add_argument("--compile-workers", type=int, default=None,
                        help="compile slots (default: the host's CPU count)")
    parser.add_argument("--arms", default="zero,costs", help="comma list: zero, costs")
    parser.add_argument("--device", default="cuda:0", help="where the GPU stages do real work")
    parser.add_argument("--log-format", choices=["console", "json"], default="console")
    parser.add_argument("--per-turn", action="store_true",
                        help="also write every turn's breakdown to the JSON (large)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="write the runs here (default: a temporary folder, removed)")
    parser.add_argument("--out", type=Path, default=Path("scheduler.json"))
    args = parser.parse_args(argv)
    args.compile_workers = args.compile_workers or os.cpu_count() or 1
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    arms = {"zero": Costs(0.0, 0.0, 0.0),
            "costs": Costs(args.llm_latency, args.compile_s, args.gpu_s, args.llm_jitter)}
    result: dict = {
        "command": " ".join(["python -m experiments.bench.scheduler",
                             *(argv if argv is not None else sys.argv[1:])]),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "arms": {}}
    with tempfile.TemporaryDirectory(prefix="kr-scheduler-") as tmp:
        root = args.keep or Path(tmp)
        for name in args.arms.split(","):
            result["arms"][name] = run_arm(name, arms[name], args, root)
    args.out.write_text(json.dumps(result, indent=1, default=str))
    print(markdown(result))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
