"""The refinement loop through its real code paths (replay model, graph, store, checkpointer),
with a scripted evaluator so every routing case runs in milliseconds."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import MATMUL, RELU

from agent import refine
from agent.runner import execute
from agent.settings import RefineSettings
from agent.store import CHECKPOINTS, RunStore


def settings(model: str, tmp_path, **kw) -> RefineSettings:
    base = {"model": model, "problems": "suite:level1/19", "backend": "cpp",
            "out": tmp_path / "runs", "turns": 4, "feedback": "G+E+P"}
    return RefineSettings(**{**base, **kw})


def stages(scripted) -> list[str]:
    return [stage for stage, _ in scripted.calls]


def test_each_outcome_routes_to_feedback_at_its_failing_stage(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "compile_error", (RELU, 0, 1): None,
                        (RELU, 0, 2): "mismatch", (RELU, 0, 3): "ok 0.5 0.01"})
    path = refine.run(settings(model, tmp_path), evaluator=scripted)
    assert stages(scripted) == ["compile",                       # compile error: to feedback
                                # no code: nothing evaluated
                                "compile", "correct",            # mismatch: no timing
                                "compile", "correct", "perform"]
    attempts = RunStore(path).attempts()
    assert [a.candidate.turn for a in attempts] == [0, 1, 2, 3]
    assert [a.result.status.value if a.result else None for a in attempts] == \
        ["compile_error", None, "mismatch", "ok"]
    assert attempts[1].candidate.code is None  # a format error costs a turn


def test_feedback_reaches_the_next_prompt(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "compile_error", (RELU, 0, 1): "ok 0.5 0.01"})
    path = refine.run(settings(model, tmp_path, turns=2), evaluator=scripted)
    first, second = RunStore(path).attempts()
    assert len(first.candidate.prompt) == 2  # system + task
    assert len(second.candidate.prompt) == 4  # + previous code + feedback
    assert "expected ';'" in second.candidate.prompt[-1]["content"]


def test_best_so_far_ignores_gains_within_noise(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.50 0.02", (RELU, 0, 1): "ok 0.495 0.02",
                        (RELU, 0, 2): "mismatch", (RELU, 0, 3): "ok 0.40 0.02"})
    path = refine.run(settings(model, tmp_path), evaluator=scripted)
    [trajectory] = RunStore(path).trajectories()
    assert trajectory.best_per_turn == [0, 0, 0, 3]  # 1% faster is within the 2% noise


def test_noise_margin_setting_raises_the_bar(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.50 0.0", (RELU, 0, 1): "ok 0.45 0.0"})
    path = refine.run(settings(model, tmp_path, turns=2, noise_margin=0.2), evaluator=scripted)
    assert RunStore(path).trajectories(0.2)[0].best_per_turn == [0, 0]


def test_target_speedup_ends_the_trajectory_early(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.8 0.0", (RELU, 0, 1): "ok 0.4 0.0"})
    path = refine.run(settings(model, tmp_path, target_speedup=2.0), evaluator=scripted)
    assert [a.candidate.turn for a in RunStore(path).attempts()] == [0, 1]  # 2.5x >= 2 at turn 1


def test_an_llm_error_ends_only_its_trajectory(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.5 0.0", (RELU, 0, 1): "ok 0.5 0.0",
                        (MATMUL, 0, 0): "ok 0.5 0.0"})  # matmul turn 1 is missing
    outcome = execute(settings(model, tmp_path, turns=2, problems="suite:level1/19,suite:level1/1"),
                      "refine", evaluator=scripted)
    assert list(outcome.failed) == [f"{MATMUL}#0"]
    assert "(problem='level1/1_square_matmul', index=0, turn=1)" in outcome.failed[f"{MATMUL}#0"]
    assert RunStore(outcome.path).done_keys() == {(RELU, 0, 0), (RELU, 0, 1), (MATMUL, 0, 0)}


def test_resume_continues_without_redoing_finished_turns(tmp_path, scripted, transcript):
    turns = {(RELU, 0, 0): "compile_error", (RELU, 0, 1): "ok 0.5 0.0"}
    outcome = execute(settings(transcript(turns), tmp_path, turns=3), "refine", evaluator=scripted)
    assert outcome.failed  # turn 2 is not in the transcript yet
    before = {row[0]: row[1] for row in sqlite3.connect(outcome.path / "attempts.sqlite").execute(
        "SELECT turn, written_at FROM attempts")}
    calls = len(scripted.calls)
    # The transcript grows; the stored settings (the old replay file) are reused on resume.
    transcript({**turns, (RELU, 0, 2): "ok 0.25 0.0"})
    again = execute(RefineSettings(resume=outcome.path), "refine", evaluator=scripted)
    assert not again.failed and again.path == outcome.path
    assert stages(scripted)[calls:] == ["compile", "correct", "perform"]  # turn 2 only
    rows = dict(sqlite3.connect(outcome.path / "attempts.sqlite").execute(
        "SELECT turn, written_at FROM attempts").fetchall())
    assert {t: rows[t] for t in before} == before  # finished attempts untouched
    assert RunStore(outcome.path).trajectories()[0].best_per_turn == [None, 1, 2]


def test_resume_after_a_crash_between_a_steps_writes_and_its_checkpoint(
        tmp_path, scripted, transcript, monkeypatch, caplog):
    """Killed after turn 0 was stored and its step's writes saved, before the next checkpoint:
    the snapshot then has no `next` node but one task holding writes; it is not finished."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    class Crash(Exception):
        pass

    real = AsyncSqliteSaver.aput

    async def crash_after_turn_0(self, config, checkpoint, metadata, new_versions):
        if checkpoint["channel_values"].get("turn") == 1:
            raise Crash("killed before the checkpoint")
        return await real(self, config, checkpoint, metadata, new_versions)

    model = transcript({(RELU, 0, t): f"ok {0.5 - 0.1 * t} 0.0" for t in range(3)})
    monkeypatch.setattr(AsyncSqliteSaver, "aput", crash_after_turn_0)
    first = execute(settings(model, tmp_path, turns=3), "refine", evaluator=scripted)
    assert "Crash" in first.failed[f"{RELU}#0"]
    assert RunStore(first.path).done_keys() == {(RELU, 0, 0)}
    monkeypatch.setattr(AsyncSqliteSaver, "aput", real)
    again = execute(RefineSettings(resume=first.path), "refine", evaluator=scripted)
    assert not again.failed
    assert RunStore(first.path).done_keys() == {(RELU, 0, t) for t in range(3)}
    assert RunStore(first.path).trajectories()[0].best_per_turn == [0, 1, 2]
    assert "unregistered type" not in caplog.text  # every state type is on the allow-list


def test_resume_after_a_crash_between_storing_an_attempt_and_saving_its_step(
        tmp_path, scripted, transcript, monkeypatch):
    """Killed after turn 0's attempt was stored but before its step's writes were saved: the
    resume runs that step again, and the stored attempt stands (not rewritten, not redone)."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    class Crash(Exception):
        pass

    killed = []
    real_writes, real_put, real_store = (AsyncSqliteSaver.aput_writes, AsyncSqliteSaver.aput,
                                         RunStore.write_attempt)

    async def writes(self, config, writes, task_id, task_path=""):
        if killed or ("turn", 1) in [tuple(w) for w in writes]:
            killed.append(True)  # from here on the process is dead: it saves and stores nothing
            raise Crash("killed before the step's writes")
        return await real_writes(self, config, writes, task_id, task_path)

    async def put(self, *args):
        if killed:
            raise Crash("killed")
        return await real_put(self, *args)

    def store(self, attempt, **kw):
        if killed:
            raise Crash("killed")
        return real_store(self, attempt, **kw)

    model = transcript({(RELU, 0, t): f"ok {0.5 - 0.1 * t} 0.0" for t in range(2)})
    monkeypatch.setattr(AsyncSqliteSaver, "aput_writes", writes)
    monkeypatch.setattr(AsyncSqliteSaver, "aput", put)
    monkeypatch.setattr(RunStore, "write_attempt", store)
    first = execute(settings(model, tmp_path, turns=2), "refine", evaluator=scripted)
    assert "Crash" in first.failed[f"{RELU}#0"]
    before = RunStore(first.path).written_at()
    assert set(before) == {(RELU, 0, 0)}
    calls = len(scripted.calls)
    monkeypatch.undo()
    again = execute(RefineSettings(resume=first.path), "refine", evaluator=scripted)
    assert not again.failed
    assert RunStore(first.path).written_at()[(RELU, 0, 0)] == before[(RELU, 0, 0)]
    assert stages(scripted)[calls:] == ["compile", "correct", "perform"]  # turn 1 only
    assert RunStore(first.path).trajectories()[0].best_per_turn == [0, 1]


def test_the_store_is_the_ground_truth_when_checkpoints_are_lost(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.5 0.0", (RELU, 0, 1): "ok 0.4 0.0"})
    path = refine.run(settings(model, tmp_path, turns=2), evaluator=scripted)
    (path / CHECKPOINTS).unlink()
    calls = len(scripted.calls)
    refine.run(RefineSettings(resume=path), evaluator=scripted)
    assert len(scripted.calls) == calls  # stored attempts are taken, not re-evaluated
    assert RunStore(path).trajectories()[0].best_per_turn == [0, 1]


def test_resume_of_a_finished_run_does_nothing(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "ok 0.5 0.0"})
    path = refine.run(settings(model, tmp_path, turns=1), evaluator=scripted)
    calls = len(scripted.calls)
    assert refine.run(RefineSettings(resume=path), evaluator=scripted) == path
    assert len(scripted.calls) == calls


def test_history_all_shows_every_earlier_attempt(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, t): "mismatch" for t in range(3)})
    path = refine.run(settings(model, tmp_path, turns=3, history="all"), evaluator=scripted)
    assert [len(a.candidate.prompt) for a in RunStore(path).attempts()] == [2, 4, 6]


def test_several_trajectories_run_concurrently_with_their_own_keys(tmp_path, scripted, transcript):
    model = transcript({(RELU, i, t): "ok 0.5 0.0" for i in range(3) for t in range(2)})
    path = refine.run(settings(model, tmp_path, turns=2, trajectories=3, concurrency=3),
                      evaluator=scripted)
    assert RunStore(path).done_keys() == {(RELU, i, t) for i in range(3) for t in range(2)}


def test_run_record_holds_settings_and_provenance(tmp_path, scripted, transcript):
    path = refine.run(settings(transcript({(RELU, 0, 0): None}), tmp_path, turns=1),
                      evaluator=scripted)
    record = RunStore(path).record()
    assert record.mode == "refine" and record.config["feedback"] == "G+E+P"
    assert record.config["backend"] == "cpp" and record.config["turns"] == 1
    assert record.template_hashes and "torch" in record.packages
    assert record.git_commit is None or len(record.git_commit) == 40
    assert (path / "run.log").read_text().count("attempt") >= 1


def test_bad_settings_fail_before_anything_is_stored(tmp_path):
    with pytest.raises(ValueError, match="feedback mode"):
        RefineSettings(feedback="G+X")
    with pytest.raises(ValueError, match="matched no problem"):
        refine.run(RefineSettings(model="replay:x.jsonl", problems="suite:level1/nope",
                                  out=tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def test_feedback_mode_and_hardware_reach_the_prompt(tmp_path, scripted, transcript):
    model = transcript({(RELU, 0, 0): "compile_error", (RELU, 0, 1): None})
    path = refine.run(settings(model, tmp_path, turns=2, feedback="G", hardware=True),
                      evaluator=scripted)
    first, second = RunStore(path).attempts()
    assert "The hardware it runs on" in first.candidate.prompt[1]["content"]
    assert "expected ';'" not in second.candidate.prompt[-1]["content"]  # G: no evaluation text
    assert RunStore(path).record().config["feedback"] == "G"
