"""`python -m feedback.worker --channel FD [--standby]` (the evaluator's way) or `python -m feedback.worker JOB.json`.

With `--channel FD` the job arrives on stdin and the report leaves through descriptor FD as frames
(feedback/worker/channel.py): a hello echoing the nonce, written before anything of the candidate
runs, after which the nonce is erased; then the report. `--standby`: import torch and the worker
first, then wait for the job (the parent starts such a worker ahead of its job: feedback/job.py,
`standby_workers`). With a JOB.json path (tests, debugging)
the report is written to `job.result_path`, echoing the nonce.

Exit status 0 once a report is written, whatever its status; 2 when the job is unreadable (then
there is nowhere to write); 3 (`feedback.job.DEVICE_WAIT_EXIT`) when a candidate's device work
outlived its limit after forward() returned (feedback/worker/devices.py). The worker leaves through `os._exit`: a candidate's `atexit` handlers
and leftover non-daemon threads must neither rewrite the report nor hold the process.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> None:
    channel_fd = None
    standby = argv[3:] == ["--standby"]
    try:
        if (len(argv) == 3 or standby) and argv[1] == "--channel":
            from feedback.worker import channel

            channel.seal()
            channel_fd = channel.hide(int(argv[2]))
            if standby:
                _import_ahead()
            data = channel.read_job(0)
            arrived = time.perf_counter()
            raw = json.loads(data)
            data[:] = bytes(len(data))  # the nonce leaves memory with the text
        elif len(argv) == 2:
            arrived = time.perf_counter()
            with open(argv[1]) as f:
                raw = json.load(f)
        else:
            print("usage: python -m feedback.worker (--channel FD | JOB.json)", file=sys.stderr)
            os._exit(2)
    except (OSError, ValueError) as exc:
        print(f"feedback.worker: cannot read the job file: {exc}", file=sys.stderr)
        os._exit(2)
    if standby and (raw.get("extensions_dir") != os.environ.get("TORCH_EXTENSIONS_DIR")
                    or raw.get("scratch_dir") != os.environ.get("HOME")):
        print("feedback.worker: a standby worker got a job for another extensions or scratch "
              "folder than it was started with", file=sys.stderr)
        os._exit(2)
    # Caches must be named before torch / triton are imported.
    from feedback.worker.caches import configure_environment

    configure_environment(raw.get("extensions_dir", ""), raw.get("scratch_dir", ""),
                          (raw.get("options") or {}).get("arch"))
    from feedback.job import WorkerJob
    from feedback.worker.run import run_job

    try:
        if channel_fd is not None:
            from feedback.worker import channel

            channel.write_frame(channel_fd, channel.hello(raw.get("kind"), raw.get("role", "candidate"),
                                                          raw.get("nonce", "")))
            raw["nonce"] = ""
        job = WorkerJob.model_validate(raw)
    except (OSError, ValueError) as exc:
        print(f"feedback.worker: invalid job: {exc}", file=sys.stderr)
        os._exit(2)
    del raw
    report = run_job(job, in_process=False, arrived=arrived)
    if channel_fd is not None:
        channel.write_frame(channel_fd, report.model_dump_json())
        _flush()
    else:
        write_report(job.result_path, report.model_dump_json())
    os._exit(0)


def _import_ahead() -> None:
    """A standby worker (`--standby`) imports torch and the worker's modules before its job
    arrives; its environment already names the caches (the parent set them when starting it)."""
    import torch  # noqa: F401

    import feedback.worker.run  # noqa: F401


def write_report(path: str, text: str) -> None:
    """Write atomically (temporary file + rename) and flush the standard streams."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    _flush()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


if __name__ == "__main__":
    main(sys.argv)
