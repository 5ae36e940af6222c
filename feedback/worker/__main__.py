"""`python -m feedback.worker --channel FD [--standby SIGNAL_FD GO_FD]` (the evaluator's way) or `python -m feedback.worker JOB.json`.

With `--channel FD` the job arrives on stdin and the report leaves through descriptor FD as frames
(feedback/worker/channel.py): a hello echoing the nonce, written before anything of the candidate
runs, after which the nonce is erased; then the report. `--standby SIGNAL_FD GO_FD`: import torch
and the worker first, say so on SIGNAL_FD (and make the CUDA context when asked on GO_FD), then wait for the job (the parent starts such a worker
ahead of its job and asks for the device once it is ready: feedback/job.py, `standby_workers`);
a reference's time job uses both pipes once more (feedback/worker/handoff.py), any other job
closes them first. With a JOB.json path (tests, debugging)
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
    standby = len(argv) == 6 and argv[3] == "--standby"
    try:
        if (len(argv) == 3 or standby) and argv[1] == "--channel":
            from feedback.worker import channel

            channel.seal()
            channel_fd = channel.hide(int(argv[2]))
            if standby:
                _import_ahead(int(argv[4]))
                _context_if_asked(int(argv[4]), int(argv[5]))
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
    if standby:
        from feedback.worker import handoff

        handoff.attach(raw, int(argv[4]), int(argv[5]))
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


def _import_ahead(signal_fd: int) -> None:
    """A standby worker (`--standby`) imports torch and the worker's modules before its job
    arrives, then says so on `signal_fd`; its environment already names the caches (the parent
    set them when starting it)."""
    import torch  # noqa: F401

    from feedback.job import READY
    from feedback.worker.run import import_ahead

    import_ahead()

    try:
        os.write(signal_fd, READY)
    except OSError:  # a parent that stopped listening: the job still arrives on stdin
        pass


def _context_if_asked(signal_fd: int, go_fd: int) -> None:
    """Before its job: when the parent asks (CONTEXT on `go_fd`; it asks for a GPU job, then
    waits), make the CUDA context and say so on `signal_fd`. A job that arrives on stdin first
    was never going to ask."""
    import select

    from feedback.job import CONTEXT
    from feedback.worker.devices import make_context

    try:
        if go_fd in select.select([0, go_fd], [], [])[0] and os.read(go_fd, 1) == CONTEXT:
            make_context()
            os.write(signal_fd, CONTEXT)
    except OSError:  # a parent that is gone: the job (or its absence) says the rest
        pass


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
