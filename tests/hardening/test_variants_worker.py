"""More exploits per class ("defend the class, not the example"), run by the worker alone.

The same guards as through `evaluate` (the worker is the same code), without the build child and
the sandbox for each variant: `python -m feedback.worker JOB.json` in a process of its own, two at
a time. The shared extension is built (or found in the cache) once, through the compile stage.
Variants that need the parent (forged results, the static screen) stay in test_exploits_cpp.py.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cases import ALL, Case, relu
from hardkit import BATCHES, problem_of

from feedback.compile import compile_candidate, locate
from feedback.environment import REPO_ROOT
from feedback.job import WorkerJob, WorkerReport
from feedback.result import Status
from feedback.sandbox import run_child

pytestmark = pytest.mark.slow

VARIANTS = [c for c in ALL if c.path == "worker"]


def run_worker(case: Case, folder: Path, options, ext: Path) -> WorkerReport:
    """One variant in `python -m feedback.worker JOB.json`."""
    candidate = folder / f"{case.name}.py"
    candidate.write_text(case.code)
    opts = options.model_copy(update=BATCHES[case.batch])
    job = WorkerJob(kind="time" if opts.time else "correct", problem=problem_of(case.problem),
                    backend="cpp", options=opts, candidate_path=str(candidate),
                    extensions_dir=str(ext), scratch_dir=str(folder),
                    result_path=str(folder / f"{case.name}.result.json"), nonce=case.name)
    job_path = folder / f"{case.name}.job.json"
    job_path.write_text(job.model_dump_json())
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    # run_child: a session of its own, killed with everything it started (the forking variant)
    out = run_child([sys.executable, "-m", "feedback.worker", str(job_path)], cwd=folder / case.name,
                    env=env, timeout_s=120, isolate=False)
    result = Path(job.result_path)
    if not result.exists():
        return WorkerReport(nonce="", status=Status.runtime_error,
                            message=f"no report ({out.describe()}): {out.stderr_tail[-2000:]}")
    return WorkerReport.model_validate_json(result.read_text())


@pytest.fixture(scope="module")
def reports(base_options, tmp_path_factory) -> dict[str, WorkerReport]:
    built = compile_candidate(problem_of("suite:level1/19"), relu("return ops.relu(x)"), "cpp",
                              base_options)
    assert built.status == Status.ok, built.message
    ext = locate(relu("return ops.relu(x)"), "cpp", base_options).extensions_dir
    folder = tmp_path_factory.mktemp("variants")
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda c: run_worker(c, folder, base_options, ext), VARIANTS))
    return {c.name: r for c, r in zip(VARIANTS, got)}


@pytest.mark.parametrize("case", VARIANTS, ids=lambda c: c.name)
def test_variant(reports, case: Case):
    r = reports[case.name]
    shown = f"{r.status.value}: {r.message[:1500]}"
    if case.klass is None:
        assert r.status == Status.ok, shown
        return
    assert r.status in (case.status, *case.extra_status), shown
    for word in case.words:
        assert word in r.message, f"{word!r} missing: {shown}"
