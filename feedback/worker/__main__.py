"""`python -m feedback.worker JOB.json`: run one job, write its report to `job.result_path`.

Exit status 0 once a report is written, whatever its status; 2 when the job file is unreadable
(then there is nowhere to write). The worker leaves through `os._exit`: a candidate's `atexit`
handlers and leftover non-daemon threads must neither rewrite the report nor hold the process.
The report is written to a temporary file and renamed, so the parent never reads half of one.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        print("usage: python -m feedback.worker JOB.json", file=sys.stderr)
        os._exit(2)
    try:
        with open(argv[1]) as f:
            raw = json.load(f)
    except (OSError, ValueError) as exc:
        print(f"feedback.worker: cannot read the job file {argv[1]}: {exc}", file=sys.stderr)
        os._exit(2)
    # Caches must be named before torch / triton are imported.
    from feedback.worker.caches import configure_environment

    configure_environment(raw.get("extensions_dir", ""), raw.get("scratch_dir", ""),
                          (raw.get("options") or {}).get("arch"))
    from feedback.job import WorkerJob
    from feedback.worker.run import run_job

    try:
        job = WorkerJob.model_validate(raw)
    except ValueError as exc:
        print(f"feedback.worker: invalid job: {exc}", file=sys.stderr)
        os._exit(2)
    report = run_job(job)
    write_report(job.result_path, report.model_dump_json())
    os._exit(0)


def write_report(path: str, text: str) -> None:
    """Write atomically (temporary file + rename) and flush the standard streams."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


if __name__ == "__main__":
    main(sys.argv)
