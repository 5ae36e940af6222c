"""Code extraction: the last fenced code block of a response that defines `ModelNew`.

Models often show a draft, a CUDA snippet or a usage example before their final answer, so the
last block that defines `ModelNew` is the answer; blocks that do not define it are ignored. A
response cut off inside its final block (max tokens) still yields that block, which then fails
to compile and is fed back as such: truncation is the model's error to learn from, not a
format error. No block defining `ModelNew` gives None, which the loop feeds back as a format
error (it costs a turn, as in the paper).
"""

from __future__ import annotations

import re

FENCE_LANGUAGES = frozenset({"", "python", "py", "python3", "cuda", "cu", "cpp", "c++", "cxx"})
"""Info strings (lower-cased first word) whose blocks may hold the answer; `` ``` `` alone is ""."""

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_DEFINES_MODEL_NEW = re.compile(r"^[ \t]*(class[ \t]+ModelNew\b|ModelNew[ \t]*=)", re.MULTILINE)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order.

    Fences follow Markdown: a line of three or more backticks (or tildes) opens a block, and a
    line of at least as many of the same character, with nothing else, closes it. Models also
    glue the closing fence to the last code line (`return y```), which is accepted when no
    proper closing line follows; a block never closed runs to the end of the text.
    """
    blocks: list[tuple[str, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _OPEN.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening["fence"]
        info = opening["info"].strip()
        language = info.split()[0].lower() if info else ""
        close = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j])), None)
        body = lines[i + 1:end]
        if end is None:  # unclosed: a fence glued to the last code line, else the end of text
            glued = next((j for j in range(i + 1, len(lines))
                          if lines[j].rstrip().endswith(fence)), None)
            if glued is not None:
                end = glued
                body = lines[i + 1:end] + [lines[end].rstrip().rstrip(fence[0])]
            else:
                end = len(lines)
        blocks.append((language, "\n".join(body)))
        i = end + 1
    return blocks


def defines_model_new(code: str) -> bool:
    """True when CODE defines `ModelNew` at the start of a line (class or assignment)."""
    return bool(_DEFINES_MODEL_NEW.search(code))


def extract_code(response: str) -> str | None:
    """The last fenced block (python/py/cuda/cpp/c++ or bare) defining `ModelNew`, else None."""
    for language, body in reversed(fenced_blocks(response or "")):
        if language in FENCE_LANGUAGES and defines_model_new(body):
            return body.strip("\n") + "\n"
    return None
