"""The demo transcript is what `transcript.py` writes, replays cleanly, and stays cheap to build."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.extract import extract_code
from agent.replay import ReplayBook
from feedback.cache import extension_material

DEMO = Path(__file__).resolve().parents[2] / "experiments" / "demo"
sys.path.insert(0, str(DEMO))

import transcript


def test_demo_jsonl_is_what_the_transcript_script_writes():
    lines = [json.loads(line) for line in (DEMO / "demo.jsonl").read_text().splitlines()]
    assert lines == transcript.entries()


def test_every_refinement_turn_and_two_samples_are_recorded():
    book = ReplayBook.load(DEMO / "demo.jsonl")
    problems = {p for p, *_ in transcript.ENTRIES}
    for problem in problems:
        for turn in range(4):
            book.response((problem, 0, turn))
        book.response((problem, 1, 0))  # `agent.sample --k 2`
    assert all("not model output" in e["note"] for e in transcript.entries())


def test_the_demo_builds_few_distinct_extensions():
    codes = [extract_code(e["response"]) for e in transcript.entries()]
    builds = {tuple(m) for c in codes if c and (m := extension_material(c)) is not None}
    assert len(builds) == 6  # each distinct build costs about a minute of CI, once
    assert sum(c is None for c in codes) == 2  # two answers without a code block
