"""A pytest plugin that streams each test's outcome as one JSON line, as it happens.

`make gpu-check` loads it (`-p experiments.bench.testlog`) with `KERNEL_REFINE_TESTLOG=FILE`, so
a run killed at its time limit still says which tests passed, which failed and which were still
running. Under pytest-xdist the controller receives every worker's reports, so one file serves.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

FAILURE_CHARS = 3000
_WORKER = False


def pytest_configure(config):
    """An xdist worker writes nothing: its reports reach the controller, which writes them."""
    global _WORKER
    _WORKER = hasattr(config, "workerinput")


def _write(row: dict) -> None:
    path = os.environ.get("KERNEL_REFINE_TESTLOG")
    if path and not _WORKER:
        with open(path, "a") as log:
            log.write(json.dumps(row) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _write({"nodeid": nodeid, "when": "start"})


def pytest_runtest_logreport(report):
    row = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
           "duration": round(report.duration, 2)}
    if report.failed:
        row["message"] = str(report.longrepr)[-FAILURE_CHARS:]
    _write(row)


def read(path) -> tuple[dict[str, dict], list[dict], list[str]]:
    """Per test file: passed / failed / skipped / seconds (setup and teardown included); each
    failure with its text; the tests started but never finished (killed at the limit)."""
    files: dict[str, dict] = {}
    outcome: dict[str, str] = {}
    failures, started = [], []
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        row = json.loads(line)
        node = row["nodeid"]
        name = node.split("::")[0]
        stats = files.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0, "seconds": 0.0})
        if row["when"] == "start":
            started.append(node)
            continue
        stats["seconds"] = round(stats["seconds"] + row["duration"], 1)
        if row["outcome"] == "failed":
            if outcome.get(node) != "failed":
                failures.append({"test": node, "when": row["when"], "message": row["message"]})
            outcome[node] = "failed"
        elif row["outcome"] == "skipped" and node not in outcome:
            outcome[node] = "skipped"
        elif row["when"] == "call" and node not in outcome:
            outcome[node] = "passed"
    for node, result in outcome.items():
        files[node.split("::")[0]][result] += 1
    unfinished = [n for n in started if n not in outcome]
    return files, failures, unfinished
