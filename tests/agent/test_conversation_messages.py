"""The messages of each turn: G vs G+E vs G+E+P differ exactly as specified.

Golden files in tests/agent/golden/ hold the full messages for one fixed history (a mismatch,
then a success with profiles). Regenerate them after a deliberate wording change with
`UPDATE_GOLDEN=1 pytest tests/agent/test_conversation_messages.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.conversation import FeedbackMode, build_messages, evaluation_text, profile_text
from agent.records import Attempt, Candidate
from feedback.result import (
    Correctness,
    EvalResult,
    Profile,
    ProfileRow,
    Roofline,
    Status,
    TimingStats,
    Tolerance,
)
from problems.record import Problem
from prompts import render

GOLDEN = Path(__file__).parent / "golden"
MODES = ["G", "G+E", "G+E+P"]
SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1024, 1024)]


def get_init_inputs():
    return []
'''
PROBLEM = Problem(id="level1/19_relu", level=1, number=19, name="relu", source=SOURCE,
                  origin="suite:level1/19_relu")
TOLERANCE = Tolerance(policy="fp64-relative", atol=1e-5, rtol=4.0)
CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return {}\n"
CODE_0, CODE_1 = CODE.format("x"), CODE.format("x.clamp_min(0)")


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, mean_ms=ms, std_ms=0.001, min_ms=ms, max_ms=ms, n=100,
                       clock="cuda_events")


MISMATCH = EvalResult(
    status=Status.mismatch, stage="correct", message="output 0: values differ",
    backend="cuda", problem_id=PROBLEM.id, code_hash="c0",
    correctness=Correctness(trials=5, trials_passed=0, max_abs_err=3.25, mean_abs_err=0.4,
                            max_rel_err=1.0, mean_rel_err=0.5, worst_index=[7, 1000],
                            expected_at_worst=0.0, got_at_worst=-3.25, tolerance=TOLERANCE))
SUCCESS = EvalResult(
    status=Status.ok, backend="cuda", problem_id=PROBLEM.id, code_hash="c1",
    correctness=Correctness(trials=5, trials_passed=5, max_abs_err=0.0, mean_abs_err=0.0,
                            tolerance=TOLERANCE),
    runtime=timing(0.0421), eager=timing(0.0502), compiled=timing(0.0388),
    speedup_eager=0.0502 / 0.0421, speedup_compile=0.0388 / 0.0421,
    profile=Profile(device="cuda", own_share=0.93, rows=[
        ProfileRow(name="relu_kernel(float const*, float*, long)", self_time_us=117.0, count=3,
                   share=0.93, own=True),
        ProfileRow(name="Memset (Device)", self_time_us=8.8, count=3, share=0.07)]),
    reference_profile=Profile(device="cuda", rows=[
        ProfileRow(name="void at::native::vectorized_elementwise_kernel<4, at::native::"
                   "(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&)>",
                   self_time_us=140.2, count=3, share=1.0)]),
    roofline=Roofline(sol_ms=0.0175, fraction=0.0175 / 0.0421),
    warnings=["work on a side stream is timed on the whole device"])


def attempt(turn: int, code: str | None, result: EvalResult | None, response: str = "") -> Attempt:
    return Attempt(candidate=Candidate(
        problem_id=PROBLEM.id, run_id="golden", index=0, turn=turn, model="replay:golden",
        template_hash="h", response=response or f"Here it is.\n```python\n{code}```\n", code=code),
        result=result)


HISTORY = [attempt(0, CODE_0, MISMATCH), attempt(1, CODE_1, SUCCESS)]
NO_CODE = attempt(2, None, None, response="Let me think about the memory layout first...")


def transcript(messages: list[dict[str, str]]) -> str:
    return "".join(f"===== {m['role']} =====\n{m['content']}\n" for m in messages)


@pytest.mark.parametrize("mode", MODES)
def test_golden_messages(mode):
    text = transcript(build_messages(PROBLEM, "cuda", HISTORY, mode, "all"))
    golden = GOLDEN / f"messages_{mode}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text(), f"{golden} differs (UPDATE_GOLDEN=1 to accept)"


def test_modes_differ_exactly_by_evaluation_and_profile_text():
    by_mode = {m: build_messages(PROBLEM, "cuda", HISTORY, m, "all") for m in MODES}
    assert [m["role"] for m in by_mode["G"]] == ["system", "user", "assistant", "user",
                                                 "assistant", "user"]
    # system, task and the previous generations are the same in every mode
    for mode in MODES:
        for i in (0, 1, 2, 4):
            assert by_mode[mode][i] == by_mode["G"][i]
    assert by_mode["G"][2]["content"] == f"```python\n{CODE_0.strip()}\n```"
    for position, past in ((3, HISTORY[0]), (5, HISTORY[1])):
        g, ge, gep = (by_mode[m][position]["content"] for m in MODES)
        head, request = g.split("\n\n")
        assert ge == "\n\n".join([head, evaluation_text(past), request])
        profile = profile_text(past.result)
        assert gep == "\n\n".join([head, evaluation_text(past)] + [profile] * bool(profile)
                                  + [request])
    # the mismatch has no profile, so P adds nothing there; the success has both tables
    assert by_mode["G+E+P"][3] == by_mode["G+E"][3]
    assert "relu_kernel" in by_mode["G+E+P"][5]["content"]
    assert "vectorized_elementwise_kernel" in by_mode["G+E+P"][5]["content"]


def test_g_mode_carries_no_evaluation():
    for message in build_messages(PROBLEM, "cuda", HISTORY, "G", "all")[3::2]:
        for word in ("error", "speedup", " ms", "input sets", "profile", "wrong", "compiled"):
            assert word not in message["content"]


def test_evaluation_texts_carry_the_numbers():
    mismatch, success = evaluation_text(HISTORY[0]), evaluation_text(HISTORY[1])
    for fact in ("5 of 5 input sets", "max absolute error: 3.25", "mean absolute error: 0.4",
                 "index [7, 1000]", "expected 0, got -3.25", "output 0: values differ"):
        assert fact in mismatch
    for fact in ("0.0421 ms", "1.19x", "0.92x", "torch.compile", "not torch.compile",
                 "side stream"):
        assert fact in success
    assert "yes" in profile_text(SUCCESS) and "93.0%" in profile_text(SUCCESS)


def test_turn_zero_is_system_and_task_in_every_mode():
    first = [build_messages(PROBLEM, "cuda", [], mode, "last") for mode in MODES]
    assert first[0] == first[1] == first[2]
    assert [m["role"] for m in first[0]] == ["system", "user"]
    assert SOURCE.strip() in first[0][1]["content"]
    assert "class ModelNew" in first[0][1]["content"]  # the one-shot example


def test_last_policy_shows_only_the_last_attempt_and_all_extends_the_previous_turn():
    last = build_messages(PROBLEM, "cuda", HISTORY, "G+E+P", "last")
    everything = build_messages(PROBLEM, "cuda", HISTORY, "G+E+P", "all")
    assert last == everything[:2] + everything[4:]
    assert everything[:4] == build_messages(PROBLEM, "cuda", HISTORY[:1], "G+E+P", "all")


def test_attempt_without_code():
    g = build_messages(PROBLEM, "cpp", [NO_CODE], "G", "last")
    ge = build_messages(PROBLEM, "cpp", [NO_CODE], "G+E+P", "last")
    assert g[2]["content"] == ge[2]["content"] == NO_CODE.candidate.response
    assert "no fenced code block defining `ModelNew`" in g[3]["content"]
    assert render("feedback_no_code") not in g[3]["content"]
    assert render("feedback_no_code") in ge[3]["content"]


def test_hardware_block_is_behind_a_flag():
    hardware = {"name": "NVIDIA H200", "sms": 132, "memory_bandwidth_gbs": 4800,
                "peak_tflops": {"fp32": 67, "bf16": 989}, "clock_mhz": 1980}
    without = build_messages(PROBLEM, "cuda", [], "G", "last")[1]["content"]
    with_hw = build_messages(PROBLEM, "cuda", [], "G", "last", hardware=hardware)[1]["content"]
    assert "NVIDIA H200" not in without
    for fact in ("device: NVIDIA H200", "streaming multiprocessors: 132", "4800 GB/s",
                 "fp32 67 TFLOP/s, bf16 989 TFLOP/s", "clock mhz: 1980"):
        assert fact in with_hw


@pytest.mark.parametrize("backend, marker", [("cuda", "__global__"), ("triton", "@triton.jit"),
                                             ("cpp", "cpp_sources=cpp_source")])
def test_task_shows_the_backend_example(backend, marker):
    _, task = build_messages(PROBLEM, backend, [], "G", "last")
    assert marker in task["content"]
    if backend == "cpp":
        assert "cuda_sources=" not in task["content"]


def test_feedback_mode_parsing():
    assert FeedbackMode.parse("g+e+p") is FeedbackMode.G_E_P
    assert FeedbackMode.parse(" G + E ") is FeedbackMode.G_E
    assert FeedbackMode.parse(FeedbackMode.G) is FeedbackMode.G
    assert str(FeedbackMode.G_E_P) == "G+E+P"
    assert (FeedbackMode.G.evaluation, FeedbackMode.G_E.profile) == (False, False)
    for bad in ("E", "G+P", "", "G+E+P+H"):
        with pytest.raises(ValueError, match="expected one of G, G\\+E, G\\+E\\+P"):
            FeedbackMode.parse(bad)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="backend"):
        build_messages(PROBLEM, "hip", [], "G", "last")
    with pytest.raises(ValueError, match="history policy"):
        build_messages(PROBLEM, "cuda", [], "G", "recent")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="has code but no evaluation result"):
        build_messages(PROBLEM, "cuda", [attempt(0, CODE_0, None)], "G+E", "last")
