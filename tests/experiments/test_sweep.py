"""Sweep expansion, naming, skip and resume, with an injected runner (no agent, no LLM)."""

from __future__ import annotations

import json

import pytest

from agent.records import RunRecord
from agent.store import RunStore, new_run_dir
from experiments import runs, sweep

PROBLEMS = {"level1/1_a": 1, "level2/1_b": 2}


def _config(**over):
    base = {"name": "t", "models": ["replay:experiments/demo/demo.jsonl"],
            "problems": ["suite:level1/1,suite:level2/1"], "settings": {"backend": "cpp"},
            "refine": {"feedback": ["G", "G+E"], "turns": [2, 3], "history": "last"},
            "sample": {"temperature": 0.7}, "budget_match": True}
    return sweep.SweepConfig.model_validate({**base, **over})


def test_expand_is_deterministic_and_budget_matched():
    plan = sweep.expand(_config())
    assert [p.mode for p in plan] == ["refine"] * 4 + ["sample"] * 2
    assert [p.settings.get("k") for p in plan if p.mode == "sample"] == [2, 3]
    assert plan[0].settings["history"] == "last" and "history" not in plan[-1].settings
    assert plan[-1].settings["temperature"] == 0.7 and plan[0].settings["backend"] == "cpp"
    assert [p.name for p in plan] == [p.name for p in sweep.expand(_config())]
    assert plan[0].name.startswith("G_N2_demo-") and plan[-1].name.startswith("k3_demo-")
    # A name depends on its own settings only: adding a model renames nothing.
    more = sweep.expand(_config(models=["replay:experiments/demo/demo.jsonl", "openai/gpt-4o"]))
    assert {p.name for p in plan} <= {p.name for p in more} and len(more) == 12


def test_expand_rejects_ambiguous_budget():
    with pytest.raises(ValueError):
        sweep.expand(_config(sample={"k": [5]}))
    with pytest.raises(ValueError):
        sweep.expand(_config(refine=None))
    assert len(sweep.expand(_config(budget_match=False, sample={"k": [1, 5]}))) == 6
    with pytest.raises(ValueError, match="out"):
        sweep.expand(_config(settings={"out": "elsewhere"}))


class FakeRunner:
    """Writes fabricated attempts like the agent would; can be told to die after some writes."""

    def __init__(self, make, die_after: dict[str, int] | None = None):
        self.make = make
        self.die_after = die_after or {}
        self.calls: list[tuple[str, bool]] = []
        self.written: list[tuple] = []

    def __call__(self, run, out, resume):
        self.calls.append((run.name, resume is not None))
        s = run.settings
        if resume is None:
            path = new_run_dir(out, run.stem)
            store = RunStore.create(path, RunRecord(run_id=run.name, mode=run.mode, config=s))
        else:
            path, store = resume, RunStore.open(resume)
        keys = [(p, i, t) for p in PROBLEMS
                for i in range(s.get("k", 1)) for t in range(s.get("turns", 1))]
        for n, key in enumerate(k for k in keys if k not in store.done_keys()):
            if n == self.die_after.get(run.name, -1):
                raise RuntimeError("killed")
            store.write_attempt(self.make(*key, eager=1.5))
            self.written.append((run.name, *key))
        return path


def test_skip_and_resume(tmp_path, monkeypatch, attempt):
    monkeypatch.setattr(runs, "selected_problems", lambda spec: (dict(PROBLEMS), None))
    plan = sweep.expand(_config())
    victim = plan[1].name
    first = FakeRunner(attempt, die_after={victim: 2})
    entries = sweep.execute(plan, tmp_path, first)
    assert [e["error"] is not None for e in entries] == [False, True, False, False, False, False]
    assert json.loads((tmp_path / sweep.INDEX).read_text())["runs"][1]["error"] == \
        "RuntimeError: killed"
    assert sweep.execute(plan, tmp_path, first, dry_run=True)[1]["action"] == "resume"

    second = FakeRunner(attempt)
    entries = sweep.execute(plan, tmp_path, second)
    assert second.calls == [(victim, True)]                  # the rest are finished: skipped
    assert len(second.written) == 6 - 2                      # 2 problems x 3 turns, 2 were stored
    assert not set(second.written) & set(first.written)      # nothing redone
    assert [e["action"] for e in entries] == ["skip", "resume"] + ["skip"] * 4
    assert all(runs.finished(sweep.find_run_dir(tmp_path, p.stem)) for p in plan)
    table = sweep.budget_table(entries)
    assert victim in table and "LLM calls" in table


def test_changed_settings_are_refused(tmp_path, monkeypatch, attempt):
    monkeypatch.setattr(runs, "selected_problems", lambda spec: (dict(PROBLEMS), None))
    plan = sweep.expand(_config())
    sweep.execute(plan[:1], tmp_path, FakeRunner(attempt))
    changed = sweep.expand(_config(settings={"backend": "cuda"}))
    with pytest.raises(ValueError, match="backend"):
        sweep.execute(changed[:1], tmp_path, FakeRunner(attempt))


def test_example_configs_expand():
    from pathlib import Path

    import yaml

    for path in sorted(Path("experiments/configs").glob("*.yaml")):
        config = sweep.SweepConfig.model_validate(yaml.safe_load(path.read_text()))
        assert sweep.expand(config), path
