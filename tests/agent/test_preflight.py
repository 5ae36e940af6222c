"""Preflight, --check and --dry-run of agent.refine / agent.sample, through their real mains.

A failed preflight is exit 2 with one line per failure and no run directory; `--check` against
the fake OpenAI-compatible server sends exactly one request; `--dry-run` sends none.
"""

from __future__ import annotations

import pytest

from agent.fake_server import FakeOpenAIServer, Reply
from agent.refine import main as refine_main
from agent.sample import main as sample_main

DEMO = "replay:experiments/demo/demo.jsonl"
RELU = ["--problems", "suite:level1/19", "--backend", "cpp"]


@pytest.fixture(autouse=True)
def no_keys(monkeypatch):
    for name in ("OPENAI_API_KEY", "KERNEL_REFINE_MODEL"):
        monkeypatch.delenv(name, raising=False)


def errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_missing_api_key_fails_before_anything_is_stored(tmp_path, capsys):
    out = tmp_path / "runs"
    assert refine_main(["--model", "openai/gpt-4o", *RELU, "--out", str(out)]) == 2
    assert errors(capsys) == [("error: model 'openai/gpt-4o' needs OPENAI_API_KEY, which is not "
                              "set: export OPENAI_API_KEY=... (or pass --llm-arg api_key=...)")]
    assert not out.exists()


def test_every_failure_is_its_own_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    code = sample_main(["--model", "openai/gpt-4o", "--problems", "suite:level9",
                        "--backend", "cpp", "--out", str(blocked / "runs")])
    lines = errors(capsys)
    assert code == 2 and len(lines) == 4 and all(line.startswith("error: ") for line in lines)
    for line, needle in zip(lines, ["OPENAI_API_KEY", "no C++ compiler", "suite:level9",
                                    "is a file, not a folder"]):
        assert needle in line


def test_cuda_backend_without_a_gpu_says_how_to_go_on(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    assert refine_main(["--model", DEMO, "--problems", "suite:level1/19", "--backend", "cuda",
                        "--out", str(tmp_path)]) == 2
    (line,) = errors(capsys)
    assert "no CUDA GPU is visible" in line and "--backend cpp" in line


def test_check_sends_one_minimal_completion_and_stores_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    with FakeOpenAIServer([Reply.ok("OK")]) as server:
        code = refine_main(["--check", "--model", "openai/fake-model", *RELU, "--out", str(out),
                            "--llm-arg", f"api_base={server.api_base}", "--llm-arg",
                            "api_key=sk-fake"])
    printed = capsys.readouterr().out
    assert code == 0 and server.request_count == 1
    assert server.requests[0]["max_tokens"] == 16
    for needle in ("check passed", "provider openai", "c++", "1 from suite:level1/19",
                   "model answered"):
        assert needle in printed
    assert not out.exists()


def test_check_reports_a_rejected_key_in_one_line_without_retrying(tmp_path, capsys):
    with FakeOpenAIServer([Reply.http_error(401)], default=Reply.ok()) as server:
        code = sample_main(["--check", "--model", "openai/fake-model", *RELU, "--out",
                            str(tmp_path), "--llm-arg", f"api_base={server.api_base}",
                            "--llm-arg", "api_key=sk-wrong"])
    (line,) = errors(capsys)
    assert code == 2 and server.request_count == 1
    assert "authentication failed" in line and "did not answer" in line


def test_check_of_a_replay_calls_nothing(tmp_path, capsys):
    assert refine_main(["--check", "--model", DEMO, *RELU, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert DEMO in printed and "model answered" not in printed


def test_dry_run_prints_the_plan_and_its_most_spend(tmp_path, capsys):
    out = tmp_path / "runs"
    code = refine_main(["--dry-run", "--model", "openai/gpt-4o", *RELU, "--turns", "3",
                        "--trajectories", "2", "--llm-arg", "max_tokens=1000",
                        "--eval-option", "timing_trials=7", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and not out.exists()
    assert "LLM calls    at most 6" in printed  # 1 problem x 2 trajectories x 3 turns
    assert "128000 in + 1000 out per call" in printed and f"most {6 * 129000} " in printed
    assert "turns        3 (feedback G+E+P" in printed and "timing_trials=7" in printed
    assert "level1/19_relu" in printed and "at most 1.9" in printed  # gpt-4o's list prices


def test_dry_run_of_sampling_counts_k_calls_and_bills_a_replay_nothing(tmp_path, capsys):
    assert sample_main(["--dry-run", "--model", DEMO, *RELU, "--k", "5",
                        "--out", str(tmp_path / "runs")]) == 0
    printed = capsys.readouterr().out
    assert "at most 5" in printed and "samples (k)  5 per problem" in printed
    assert "0 (replayed)" in printed and not (tmp_path / "runs").exists()
