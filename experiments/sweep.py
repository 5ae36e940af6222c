"""Sweeps: one YAML file -> models x feedback modes x turns / k x problem sets x seeds.

    python -m experiments.sweep experiments/configs/feedback_ablation.yaml [--out DIR] [--dry-run]
        [--executor local|ray] [--ray-address auto|HOST:PORT]

Before any run starts, every run is preflighted (settings, model credentials, toolchain,
problems, output folder: `experiments.sweep_plan`); a failure is one line and exit status 2.

Every run gets a name made only from its own settings, so re-running a sweep finds its runs again:
a finished run is skipped, an interrupted one is resumed (the agent never redoes a stored turn), a
missing one is started. `budget_match: true` gives sampling k = N for every refinement N, and the
printed table shows what each run really spent (calls, tokens, dollars, GPU-seconds), counted from
the store. The sweep index (`sweep.json` in the output folder) maps names to run directories.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from agent.preflight import PreflightError
from experiments.sweep_plan import plan_table, preflight_sweep
from feedback.executor import ExecutorError, check_executor
from problems.cli import CLIParser, user_error

INDEX = "sweep.json"
IGNORED_WHEN_MATCHING = {"concurrency", "log_format", "llm_timeout_s", "name", "out", "resume",
                         "executor", "ray_address"}
SET_BY_SWEEP = {"model", "problems", "seed", "feedback", "turns", "k", "name", "out", "resume"}


class RefineAxes(BaseModel):
    """The refinement part of a sweep: feedback modes x turns; other keys go to every run."""

    model_config = ConfigDict(extra="allow")
    feedback: list[str] = Field(default=["G+E+P"], description="Feedback modes (G, G+E, G+E+P).")
    turns: list[int] = Field(default=[10], description="Turn budgets N.")


class SampleAxes(BaseModel):
    """The sampling part: sample counts k (or those of refinement with `budget_match`)."""

    model_config = ConfigDict(extra="allow")
    k: list[int] = Field(default=[], description="Samples per problem; empty with budget_match.")


class SweepConfig(BaseModel):
    """A sweep file. `settings` reach every run (backend, size, concurrency, llm_args...)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="Sweep name (the default output folder is runs/<name>).")
    out: Path | None = Field(default=None, description="Output folder; --out wins.")
    models: list[str] = Field(min_length=1, description="litellm model strings or replay:FILE.")
    problems: list[str] = Field(min_length=1, description="Problem sets, one spec string each.")
    seeds: list[int | None] = Field(default=[None], description="Provider sampling seeds.")
    settings: dict[str, Any] = Field(default_factory=dict)
    refine: RefineAxes | None = None
    sample: SampleAxes | None = None
    budget_match: bool = Field(default=False, description="Sampling k = each refinement N.")


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its deterministic name, mode and agent settings (without out/resume)."""

    name: str
    mode: Literal["refine", "sample"]
    settings: dict[str, Any]

    @property
    def stem(self) -> str:
        """What the agent puts between the timestamp and the id of the run directory."""
        return f"{self.mode}_{self.name}"


Runner = Callable[[PlannedRun, Path, "Path | None"], Path]
"""(run, output folder, run directory to resume or None) -> the run directory."""


def _slug(text: str, keep: int = 24, readable: str | None = None) -> str:
    """Readable and unique: a file-name-safe prefix plus a short hash of the whole text."""
    prefix = re.sub(r"[^A-Za-z0-9.]+", "-", readable or text).strip("-")[:keep]
    return f"{prefix}-{hashlib.sha1(text.encode()).hexdigest()[:4]}"


def _model_slug(model: str) -> str:
    """`openai/gpt-4o` -> `gpt-4o-<hash>`, `replay:experiments/demo/demo.jsonl` -> `demo-<hash>`."""
    tail = Path(model.rstrip("/").split("/")[-1].split(":")[-1])
    return _slug(model, 16, tail.stem if tail.suffix == ".jsonl" else tail.name)


def expand(config: SweepConfig) -> list[PlannedRun]:
    """Every run the sweep asks for, in a stable order."""
    if config.budget_match and config.sample and config.sample.k:
        raise ValueError("give sample.k or budget_match, not both")
    if config.budget_match and not (config.refine and config.sample is not None):
        raise ValueError("budget_match needs a refine section and a sample section")
    for section, extra in (("settings", config.settings),
                           ("refine", config.refine.model_extra if config.refine else {}),
                           ("sample", config.sample.model_extra if config.sample else {})):
        clash = sorted(SET_BY_SWEEP & set(extra or {}))
        if clash:
            raise ValueError(f"`{section}` may not set {clash}: the sweep's axes and --out do")
    ks = (config.refine.turns if config.budget_match else config.sample.k) if config.sample else []
    plan: list[PlannedRun] = []
    for model in config.models:
        for spec in config.problems:
            for seed in config.seeds:
                base = {**config.settings, "model": model, "problems": spec}
                if seed is not None:
                    base["seed"] = seed
                tail = f"{_model_slug(model)}_{_slug(spec)}" + ("" if seed is None else f"_s{seed}")
                if config.refine:
                    extra = config.refine.model_extra or {}
                    for mode in config.refine.feedback:
                        for turns in config.refine.turns:
                            name = f"{mode.replace('+', '')}_N{turns}_{tail}"
                            plan.append(PlannedRun(name, "refine", {
                                **base, **extra, "feedback": mode, "turns": turns, "name": name}))
                for k in ks:
                    name = f"k{k}_{tail}"
                    plan.append(PlannedRun(name, "sample", {
                        **base, **(config.sample.model_extra or {}), "k": k, "name": name}))
    names = [p.name for p in plan]
    if len(set(names)) != len(names):
        raise ValueError("two runs of this sweep share a name; are values repeated in a list?")
    return plan


def find_run_dir(out: Path, stem: str) -> Path | None:
    """The newest `<timestamp>_<stem>_<id>` directory (the store's naming) under `out`."""
    pattern = re.compile(rf"^\d{{8}}-\d{{6}}_{re.escape(stem)}_[0-9a-f]+$")
    found = sorted(p for p in out.glob(f"*_{stem}_*") if pattern.match(p.name)) \
        if out.is_dir() else []
    return found[-1] if found else None


def settings_mismatch(planned: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """Planned settings that an existing run recorded differently (it would resume the old ones)."""
    return [f"{k}: stored {stored[k]!r}, planned {v!r}" for k, v in planned.items()
            if k not in IGNORED_WHEN_MATCHING and k in stored and str(stored[k]) != str(v)]


def run_refine(settings: dict[str, Any], out: Path, resume: Path | None) -> Path:
    """Start or resume a refinement run through the agent's Python API."""
    from agent.refine import run
    from agent.settings import RefineSettings

    return run(RefineSettings(**settings, out=out, resume=resume))


def run_sample(settings: dict[str, Any], out: Path, resume: Path | None) -> Path:
    """Start or resume a repeated-sampling run through the agent's Python API."""
    from agent.sample import run
    from agent.settings import SampleSettings

    return run(SampleSettings(**settings, out=out, resume=resume))


def run_agent(run: PlannedRun, out: Path, resume: Path | None) -> Path:
    """The default runner: the agent, in this process."""
    launch = run_refine if run.mode == "refine" else run_sample
    return launch(run.settings, out, resume)


def execute(plan: list[PlannedRun], out: Path, runner: Runner = run_agent,
            dry_run: bool = False) -> list[dict[str, Any]]:
    """Skip finished runs, resume interrupted ones, start the rest; returns the index entries.

    A run that raises is recorded as failed and the sweep goes on; its stored attempts stay, so
    the next invocation resumes it.
    """
    from experiments.runs import finished, load_run

    entries = []
    for run in plan:
        path = find_run_dir(out, run.stem)
        if path is not None:
            clash = settings_mismatch(run.settings, load_run(path).config)
            if clash:
                raise ValueError(f"{path} holds {run.name} with other settings ({'; '.join(clash)})"
                                 "; give the sweep another name or output folder")
        action = "start" if path is None else "skip" if finished(path) else "resume"
        entry = {"name": run.name, "mode": run.mode, "settings": run.settings,
                 "path": str(path) if path else None, "action": action, "error": None,
                 "complete": action == "skip"}
        if not dry_run and action != "skip":
            print(f"[sweep] {action} {run.name}", file=sys.stderr, flush=True)
            try:
                entry["path"] = str(runner(run, out, path))
            except Exception as exc:  # noqa: BLE001 - recorded; the sweep goes on
                entry["error"] = f"{type(exc).__name__}: {exc}"
                found = find_run_dir(out, run.stem)
                entry["path"] = str(found) if found else entry["path"]
            # A run can return with some trajectories ended by errors: the next sweep resumes it.
            entry["complete"] = entry["path"] is not None and finished(Path(entry["path"]))
        entries.append(entry)
        if not dry_run:
            write_index(out, entries)
    return entries


def confirm_entries(entries: list[dict[str, Any]], executor: str) -> None:
    """Confirmation timing (experiments/confirm.py) of every finished run's selected kernels,
    cached per kernel and machine, so identical kernels in several runs are reported alike. On
    this machine only: with a Ray executor the GPUs may be elsewhere, and the sweep says so."""
    from experiments.confirm import confirm_run

    done = [e for e in entries if e["complete"] and e["path"]]
    if executor != "local":
        if done:
            print("[sweep] selected kernels not confirmed here (executor ray): run "
                  "python -m experiments.confirm on a GPU node", file=sys.stderr)
        return
    for e in done:
        try:
            n = len(confirm_run(Path(e["path"])))
            print(f"[sweep] confirmed {n} selected kernels of {e['name']}", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001 - the runs stay; the report says unconfirmed
            e["confirm_error"] = f"{type(exc).__name__}: {exc}"
            print(f"[sweep] confirmation of {e['name']} failed: {e['confirm_error']}",
                  file=sys.stderr)


def write_index(out: Path, entries: list[dict[str, Any]]) -> Path:
    """Write `sweep.json`: every run's name, mode, settings, directory, action and error."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / INDEX
    path.write_text(json.dumps({"runs": entries}, indent=2, default=str))
    return path


def budget_table(entries: list[dict[str, Any]]) -> str:
    """What each run actually spent, counted from its store (N or k shows the matched budget)."""
    from experiments.budget import spend
    from experiments.runs import load_run
    from experiments.tables import markdown_table

    rows = []
    for e in entries:
        size = e["settings"].get("turns") if e["mode"] == "refine" else e["settings"].get("k")
        if not e["path"] or not Path(e["path"]).is_dir():
            rows.append([e["name"], e["mode"], size, None, None, None, None, None, e["action"]])
            continue
        b = spend(load_run(Path(e["path"])).attempts())
        state = "failed" if e["error"] else e["action"] + ("" if e["complete"] else ", incomplete")
        rows.append([e["name"], e["mode"], size, b.calls, b.prompt_tokens, b.completion_tokens,
                     b.dollars_text, round(b.gpu_seconds, 1), state])
    headers = ["run", "mode", "N or k", "LLM calls", "prompt tokens", "completion tokens",
               "dollars", "GPU-seconds", "this sweep"]
    return markdown_table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    parser = CLIParser(prog="python -m experiments.sweep", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", type=Path, help="Sweep YAML file.")
    parser.add_argument("--out", type=Path, help="Output folder (default: the file's `out`, "
                        "else runs/<name>).")
    parser.add_argument("--dry-run", action="store_true", help="Print the plan (every run's "
                        "problems, trajectories or k, turns, the most LLM calls and tokens, "
                        "evaluator settings) and run nothing.")
    parser.add_argument("--executor", choices=["local", "ray"], help="Where every run's "
                        "evaluations run (wins over `settings.executor`; docs/scaling.md).")
    parser.add_argument("--ray-address", metavar="auto|HOST:PORT", help="Ray cluster for "
                        "--executor ray (wins over `settings.ray_address`).")
    parser.add_argument("--no-confirm", action="store_true", help="Skip the confirmation timing "
                        "of each finished run's selected kernels (experiments.confirm; on by "
                        "default, so a report never publishes the maximum of noisy draws).")
    args = parser.parse_args(argv)
    try:
        config = SweepConfig.model_validate(yaml.safe_load(args.config.read_text()))
    except (OSError, yaml.YAMLError, ValueError) as e:
        parser.fail(ValueError(f"{args.config}: {user_error(e, flags=str)}"))
    out = args.out or config.out or Path("runs") / config.name
    placement = {k: v for k, v in (("executor", args.executor),
                                   ("ray_address", args.ray_address)) if v is not None}
    if placement:
        config = config.model_copy(update={"settings": {**config.settings, **placement}})
    try:
        check_executor(config.settings.get("executor", "local"), config.settings.get("ray_address"))
        plan = expand(config)
        checked = preflight_sweep(plan, execute(plan, out, dry_run=True), out)
    except ExecutorError as e:
        parser.error(str(e))
    except PreflightError as e:
        for line in e.lines:
            print(f"{parser.prog}: error: {line}", file=sys.stderr)
        return 2
    except ValueError as e:
        parser.fail(e, flags=str)
    if args.dry_run:
        print(plan_table(checked))
        return 0
    entries = execute(plan, out)
    if not args.no_confirm:
        confirm_entries(entries, config.settings.get("executor", "local"))
    print(budget_table(entries))
    failed = [e for e in entries if e["error"]]
    for e in failed:
        print(f"failed: {e['name']}: {e['error']}", file=sys.stderr)
    print(f"index: {out / INDEX}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
