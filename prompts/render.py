"""One `render()` over every prompt template, and the hashes that pin them in a run record.

All prompt text, feedback wording included, lives in this folder's `*.j2` files and the one-shot
examples in `examples/`, so changing the wording never touches code, and a run records exactly
which wording it used (`template_hashes()`). Rendering is strict: a variable the caller forgot is
an error (`StrictUndefined`), never a silently empty hole in a prompt.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

PROMPTS_DIR = Path(__file__).resolve().parent
EXAMPLES_DIR = PROMPTS_DIR / "examples"
EXAMPLES = ("reference", "cuda", "triton", "cpp")
"""`reference` is the example problem; the others are its answer for each backend."""


def example_source(name: str) -> str:
    """The source of the one-shot example NAME (`reference`, `cuda`, `triton`, `cpp`)."""
    if name not in EXAMPLES:
        raise ValueError(f"no one-shot example {name!r}; known: {', '.join(EXAMPLES)}")
    return (EXAMPLES_DIR / f"add_{name}.py").read_text(encoding="utf-8").strip("\n")


def clip(text: Any, limit: int = 4000) -> str:
    """TEXT bounded to about LIMIT characters, keeping its head and tail (errors tend to be
    first, and context last), with the cut said in words."""
    text = str(text).strip("\n")
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 3 // 4], text[-(limit // 4):]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} characters omitted ...]\n{tail}"


def shorten(text: Any, width: int = 80) -> str:
    """TEXT on one line, cut to WIDTH characters (for long C++ kernel names in tables)."""
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def number(value: float | None, digits: int = 4) -> str:
    """A float to DIGITS significant digits; `n/a` for an unmeasured (None) value."""
    return "n/a" if value is None else f"{value:.{digits}g}"


def _fail(message: str) -> str:
    """Lets a template refuse input it cannot render (e.g. an unknown backend)."""
    raise ValueError(message)


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared, strict jinja2 environment loading this folder."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(PROMPTS_DIR),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
        autoescape=False,
    )
    env.globals["example_source"] = example_source
    env.globals["fail"] = _fail
    env.filters["clip"] = clip
    env.filters["number"] = number
    env.filters["shorten"] = shorten
    return env


def render(template: str, **variables: Any) -> str:
    """Render TEMPLATE (`task` or `task.j2`) with VARIABLES; surrounding blank lines removed.

    Raises:
        jinja2.UndefinedError: the template uses a variable that was not given.
        jinja2.TemplateNotFound: there is no such template.
    """
    name = template if template.endswith(".j2") else f"{template}.j2"
    return environment().get_template(name).render(**variables).strip()


def _prompt_files() -> list[Path]:
    return sorted([*PROMPTS_DIR.glob("*.j2"), *(EXAMPLES_DIR / f"add_{n}.py" for n in EXAMPLES)])


def template_hashes() -> dict[str, str]:
    """sha256 of every template and example file, by path relative to this folder."""
    return {path.relative_to(PROMPTS_DIR).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in _prompt_files()}


def template_set_hash(hashes: dict[str, str] | None = None) -> str:
    """One sha256 over all of `template_hashes()`: the `Candidate.template_hash` of a run."""
    canonical = json.dumps(hashes if hashes is not None else template_hashes(), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()
