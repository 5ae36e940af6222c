"""Code extraction: the last fenced block that defines ModelNew."""

from __future__ import annotations

import pytest

from agent.extract import extract_code, fenced_blocks

MODEL = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def fence(body: str, language: str = "python", ticks: str = "```") -> str:
    return f"{ticks}{language}\n{body}{ticks}\n"


@pytest.mark.parametrize("language", ["python", "py", "Python", "python3", "cuda", "cpp", "c++",
                                      ""])
def test_accepted_fence_languages(language):
    assert extract_code(f"Here it is:\n{fence(MODEL, language)}Done.") == MODEL


def test_other_languages_are_ignored():
    assert extract_code(fence(MODEL, "bash")) is None
    assert extract_code(fence(MODEL, "text")) is None


def test_the_last_block_defining_model_new_wins():
    draft = MODEL.replace("pass", "x = 'draft'")
    usage = "model = ModelNew()\nprint(model)\n"
    response = (f"Draft:\n{fence(draft)}Final:\n{fence(MODEL)}Usage:\n{fence(usage)}"
                f"Kernel alone:\n{fence('__global__ void k() {}', 'cuda')}")
    assert extract_code(response) == MODEL


def test_none_when_nothing_defines_model_new():
    assert extract_code("") is None
    assert extract_code("I cannot help with that.") is None
    assert extract_code(fence("class Model(nn.Module):\n    pass\n")) is None
    assert extract_code(fence("x = ModelNewer()\n")) is None
    assert extract_code("class ModelNew(nn.Module): pass  # outside any fence") is None


def test_assignment_counts_as_a_definition():
    code = "class Fast(nn.Module):\n    pass\n\nModelNew = Fast\n"
    assert extract_code(fence(code)) == code


def test_unterminated_final_fence_runs_to_the_end():
    truncated = "```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self"
    assert extract_code("Sure.\n" + truncated) == truncated.split("\n", 1)[1] + "\n"


def test_closing_fence_glued_to_the_last_line():
    response = "```python\nclass ModelNew:\n    pass```\nThat is all."
    assert extract_code(response) == "class ModelNew:\n    pass\n"


def test_longer_fences_and_inner_backticks():
    body = 'class ModelNew:\n    """Example:\n    ```\n    x\n    ```\n    """\n'
    assert extract_code(fence(body, "python", "````")) == body


def test_tilde_fences_and_indented_fences():
    assert extract_code(fence(MODEL, "python", "~~~")) == MODEL
    assert extract_code("  ```python\n" + MODEL + "  ```\n") == MODEL


def test_inline_triple_backticks_do_not_open_a_block():
    assert extract_code("Use ```python fences``` like this.\n" + fence(MODEL)) == MODEL


def test_think_section_drafts_lose_to_the_answer():
    response = f"<think>\nmaybe:\n{fence(MODEL.replace('pass', 'y = 1'))}</think>\n{fence(MODEL)}"
    assert extract_code(response) == MODEL


def test_fenced_blocks_lists_languages_and_bodies():
    text = "```cpp\nint x;\n```\ntext\n```\nbare\n```\n```CUDA extra info\nk\n"
    assert fenced_blocks(text) == [("cpp", "int x;"), ("", "bare"), ("cuda", "k")]
