"""A batch of 50 through `evaluate_many` (faults.py): every honest candidate gets its correct
result, every bad one its reason, the batch finishes, no process outlives its job, and the wall
time is what the items account for (a fault costs no more than an honest evaluation; a hang its
time limit), not more."""

from __future__ import annotations

import statistics
import time

import pytest
from faults import FAULTS, TIMEOUT_S
from hardkit import leaked_workers

from feedback.result import Status

pytestmark = pytest.mark.slow


def test_every_candidate_gets_its_result(fault_batch):
    results, _ = fault_batch
    wrong = [(i, f.kind, r.status.value, r.message[:300]) for i, (f, r) in enumerate(zip(FAULTS, results))
             if r.status != f.status or f.words not in r.message]
    assert not wrong, wrong
    for f, r in zip(FAULTS, results):
        if f.status == Status.ok:
            assert r.correctness.trials_passed == r.correctness.trials >= 6


def test_the_batch_costs_what_its_items_cost(fault_batch):
    results, wall = fault_batch
    honest = [sum(r.stage_seconds.values()) for f, r in zip(FAULTS, results) if f.status == Status.ok]
    worst_honest = max(honest)
    for f, r in zip(FAULTS, results):
        spent = sum(r.stage_seconds.values())
        if f.kind == "hang":
            assert r.stage_seconds["correct"] <= TIMEOUT_S + 5, (f.kind, r.stage_seconds)
        else:
            assert spent <= worst_honest + 10, (f.kind, r.stage_seconds, worst_honest)
    device_work = sum(r.stage_seconds.get("correct", 0.0) for r in results)
    builds = sum(r.stage_seconds.get("compile", 0.0) for r in results)
    print(f"\nbatch of 50: {wall:.0f} s wall; correctness children {device_work:.0f} s in all; builds "
          f"{builds:.0f} s; honest median {statistics.median(honest):.1f} s, slowest {worst_honest:.1f} s")
    assert wall <= device_work + builds + 30


def test_no_process_outlives_the_batch(fault_batch):
    deadline = time.monotonic() + 5
    while leaked_workers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leaked_workers() == []
