"""Where a device job's seconds go inside the worker, by function (cProfile).

    python -m experiments.bench.worker_profile [--problems 19_relu 23_softmax] [--out DIR]

Each job (correctness; time of the candidate, the eager and the torch.compile reference) runs
in this process through `feedback.worker.run_job`, as a worker runs it, twice: the first run
carries a fresh process's first-use costs, the second does not. The candidate is the
reference's own forward under another name (pure PyTorch: the harness's costs, not a kernel's).
Writes `<out>/<problem>-<kind>-<role>-<run>.txt` (cumulative and own time, top functions) and
prints one line per job: its status, wall seconds and phases. On a machine without a GPU the
jobs run on the CPU at the problem's `small` size.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

from feedback.job import WorkerJob
from feedback.options import EvalOptions
from problems.loaders import SUITE_ROOT, load_file

JOBS = (("correct", "candidate"), ("time", "candidate"), ("time", "eager"), ("time", "compiled"))

CANDIDATE = """
from reference import Model as _Reference


class ModelNew(_Reference):
    pass
"""


def profile_job(job: WorkerJob, out: Path, name: str) -> dict:
    """Run `job` under cProfile; write its statistics to `out/name.txt`; its summary row."""
    from feedback.worker import run_job

    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    report = run_job(job)
    profiler.disable()
    text = io.StringIO()
    for order in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(40)
    (out / f"{name}.txt").write_text(text.getvalue())
    return {"job": name, "status": report.status.value, "wall_s": round(time.perf_counter() - start, 3),
            "phases": {k: v for k, v in report.phases.items() if v >= 0.01},
            "message": report.message[:300]}


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", nargs="+", default=["19_relu", "23_softmax"],
                        help="level-1 problems of problems/suite (default: %(default)s)")
    parser.add_argument("--jobs", default="correct/candidate,time/candidate,time/eager,time/compiled",
                        help="comma list of KIND/ROLE")
    parser.add_argument("--out", type=Path, default=Path("worker_profile"))
    args = parser.parse_args(argv)
    jobs = [tuple(j.split("/")) for j in args.jobs.split(",")]
    if unknown := [j for j in jobs if j not in JOBS]:
        parser.error(f"--jobs: unknown {unknown}; choose from {['/'.join(j) for j in JOBS]}")
    gpu = torch.cuda.is_available()
    args.out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="kr-worker-profile-"))
    rows = []
    for name in args.problems:
        path = SUITE_ROOT / "level1" / f"{name}.py"
        if not path.is_file():
            parser.error(f"no problem {path}")
        problem = load_file(path)
        (root / "reference.py").write_text(problem.source)
        candidate = root / "candidate.py"
        candidate.write_text(f"import sys\nsys.path.insert(0, {str(root)!r})\n{CANDIDATE}")
        options = EvalOptions(device="cuda:0" if gpu else "cpu", size=None if gpu else "small",
                              library_ops="allow", cache_dir=str(root / "cache"))
        for kind, role in jobs:
            for run in (0, 1):
                job = WorkerJob(kind=kind, role=role, problem=problem,
                                backend="cuda" if gpu else "cpp", options=options,
                                candidate_path=str(candidate), extensions_dir=str(root / "ext"),
                                scratch_dir=str(root), result_path=str(root / "result.json"),
                                nonce=f"profile-{len(rows)}")
                rows.append(profile_job(job, args.out, f"{name}-{kind}-{role}-{run}"))
                print(json.dumps(rows[-1]), flush=True)
    (args.out / "jobs.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
