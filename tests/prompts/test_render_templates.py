"""Templates: strict rendering, every outcome worded, hashes, and one-shot examples that a
candidate would pass the static screen with."""

from __future__ import annotations

import ast
import hashlib

import jinja2
import pytest

from agent.conversation import feedback_template
from agent.extract import extract_code
from feedback.result import EvalResult, Status
from feedback.static import screen
from prompts import example_source, render, template_hashes, template_set_hash
from prompts.render import PROMPTS_DIR, clip, number, shorten


def bare_result(status: Status, **fields) -> EvalResult:
    """A result with nothing measured: every optional field None."""
    return EvalResult(status=status, backend="cpp", problem_id="level1/1_x", code_hash="0",
                      **fields)


def test_missing_variable_raises():
    with pytest.raises(jinja2.UndefinedError, match="problem_source"):
        render("task", backend="cuda", hardware=None)
    with pytest.raises(jinja2.UndefinedError):
        render("feedback_mismatch")


def test_template_names_with_or_without_suffix():
    assert render("system", backend="cpp") == render("system.j2", backend="cpp")
    with pytest.raises(jinja2.TemplateNotFound):
        render("no_such_template")


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend 'hip'"):
        render("system", backend="hip")


@pytest.mark.parametrize("status", list(Status))
def test_every_outcome_has_wording_even_with_nothing_measured(status):
    name = feedback_template(bare_result(status))
    assert (PROMPTS_DIR / f"{name}.j2").is_file()
    text = render(name, result=bare_result(status, message="the first error\nsecond line"))
    assert text
    if status != Status.ok:  # a failure's own message is always shown
        assert "the first error" in text
    assert "None" not in text


def test_no_code_wording():
    assert feedback_template(None) == "feedback_no_code"
    assert "```python" in render("feedback_no_code") and "ModelNew" in render("feedback_no_code")


def test_success_advice_follows_the_speedups():
    slower = render("feedback_success", result=bare_result(Status.ok, speedup_eager=0.5))
    between = render("feedback_success",
                     result=bare_result(Status.ok, speedup_eager=1.5, speedup_compile=0.8))
    ahead = render("feedback_success",
                   result=bare_result(Status.ok, speedup_eager=1.5, speedup_compile=1.2))
    unmeasured = render("feedback_success", result=bare_result(Status.ok))
    assert "slower than the PyTorch reference" in slower
    assert "not torch.compile" in between
    assert "It beats the reference" in ahead
    assert "not measured" in unmeasured


def test_long_messages_are_clipped_keeping_head_and_tail():
    message = "first error\n" + "x" * 20000 + "\nlast line"
    text = render("feedback_compile_error", result=bare_result(Status.compile_error,
                                                                message=message))
    assert "first error" in text and "last line" in text and "characters omitted" in text
    assert len(text) < 5000


def test_filters():
    assert clip("short") == "short"
    assert number(None) == "n/a" and number(0.000123456) == "0.0001235"
    assert shorten("a\nb  c" + "d" * 100, 10) == "a b cdd..."


def test_template_hashes_cover_every_template_and_example():
    hashes = template_hashes()
    templates = {p.name for p in PROMPTS_DIR.glob("*.j2")}
    assert templates <= hashes.keys()
    assert {"examples/add_cuda.py", "examples/add_triton.py", "examples/add_cpp.py",
            "examples/add_reference.py"} <= hashes.keys()
    assert hashes["task.j2"] == hashlib.sha256((PROMPTS_DIR / "task.j2").read_bytes()).hexdigest()
    assert template_set_hash() == template_set_hash(hashes)
    assert template_set_hash({**hashes, "task.j2": "0" * 64}) != template_set_hash(hashes)


@pytest.mark.parametrize("backend", ["cuda", "triton", "cpp"])
def test_examples_are_answers_the_static_screen_accepts(backend):
    source = example_source(backend)
    ast.parse(source)
    assert extract_code(f"```python\n{source}\n```") == source + "\n"
    assert [f.render() for f in screen(source, backend) if f.severity == "error"] == []


def test_reference_example_is_a_problem():
    names = {n.name for n in ast.parse(example_source("reference")).body
             if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    assert names == {"Model", "get_inputs", "get_init_inputs"}
    with pytest.raises(ValueError, match="no one-shot example"):
        example_source("hip")
