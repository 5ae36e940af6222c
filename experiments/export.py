"""`python -m experiments.export RUN_DIR --format jsonl|csv|parquet --out FILE`.

One flat row per attempt the run asked for, for pandas, R or a spreadsheet. An attempt that was
asked for but never stored is a row with status `missing`, so an analysis made from the export
alone cannot silently drop failures. Prompts and raw responses stay in the store.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

from agent.records import Attempt
from experiments.metrics import compiled, is_correct, status_of
from experiments.runs import Run, load_run

FORMATS = ("jsonl", "csv", "parquet")
COLUMNS = (
    "run_id", "mode", "problem_id", "level", "index", "turn", "status", "stage", "message",
    "compiled", "correct", "speedup_eager", "speedup_compile", "runtime_ms", "eager_ms",
    "compile_ms", "noise", "trials", "trials_passed", "max_abs_err", "max_rel_err", "backend",
    "size", "device", "model", "template_hash", "prompt_tokens", "completion_tokens", "cost_usd",
    "latency_s", "gpu_seconds", "code_hash", "code",
)


def _median(timing) -> float | None:
    return timing.median_ms if timing is not None else None


def attempt_row(run: Run, key: tuple[str, int, int], a: Attempt | None) -> dict[str, Any]:
    """The flat row of one asked-for attempt (None: never stored)."""
    problem, index, turn = key
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(run_id=run.record.run_id, mode=run.mode, problem_id=problem,
               level=run.levels.get(problem), index=index, turn=turn, status=status_of(a),
               compiled=compiled(a), correct=is_correct(a))
    if a is None:
        return row
    c, u = a.candidate, a.candidate.usage
    row.update(model=c.model, template_hash=c.template_hash, prompt_tokens=u.prompt_tokens,
               completion_tokens=u.completion_tokens, cost_usd=u.cost_usd, latency_s=u.latency_s,
               gpu_seconds=a.gpu_seconds, code=c.code)
    r = a.result
    if r is not None:
        row.update(stage=r.stage, message=r.message, speedup_eager=r.speedup_eager,
                   speedup_compile=r.speedup_compile, runtime_ms=_median(r.runtime),
                   eager_ms=_median(r.eager), compile_ms=_median(r.compiled), noise=r.noise,
                   backend=r.backend, size=r.size, code_hash=r.code_hash,
                   device=r.environment.device if r.environment else None)
        if r.correctness is not None:
            k = r.correctness
            row.update(trials=k.trials, trials_passed=k.trials_passed,
                       max_abs_err=k.max_abs_err, max_rel_err=k.max_rel_err)
    return row


def rows(run: Run) -> list[dict[str, Any]]:
    """Every asked-for attempt, in (problem, index, turn) order."""
    return [attempt_row(run, key, run.grid.get(key)) for key in run.layout.asked()]


def write(table: list[dict[str, Any]], path: Path, fmt: str) -> Path:
    """Write rows as JSONL, CSV (None -> empty cell) or Parquet."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in table))
    elif fmt == "csv":
        with path.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=COLUMNS)
            writer.writeheader()
            writer.writerows(table)
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(table), path)
    else:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, metavar="RUN_DIR")
    parser.add_argument("--format", choices=FORMATS, help="Default: from the --out suffix.")
    parser.add_argument("--out", type=Path, required=True, help="File to write.")
    args = parser.parse_args(argv)
    fmt = args.format or args.out.suffix.lstrip(".")
    if fmt not in FORMATS:
        parser.error(f"cannot tell the format from {args.out.name}; pass --format")
    table = rows(load_run(args.run))
    write(table, args.out, fmt)
    print(f"wrote {len(table)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
