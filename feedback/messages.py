"""Turn raw compiler output and tracebacks into the short message a model learns from (E feedback).

Raw output is long, repetitive and full of the evaluator's own paths; a model given 400 lines of
ninja command lines learns nothing and a harness path teaches it where to look for secrets. The
cleaned message keeps the first errors with file:line in the candidate's own names, de-duplicated,
and is always bounded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MAX_LINES = 60
MAX_CHARS = 8000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ERROR = re.compile(r"(^|[\s:(])(fatal )?error( [A-Z]+\d+)?[:\s]|undefined reference|undefined symbol"
                    r"|multiple definition|ld returned|Error building extension", re.IGNORECASE)
_NOT_ERROR = re.compile(r"^\s*(#|//)|\d+ errors? detected|^Traceback")
_CONTEXT = re.compile(r": (In function|In member function|In instantiation|In lambda)|"
                      r"^In file included from")
_DIAG = re.compile(r"^\S.*(:\d+(:\d+)?: |\(\d+\): )")
_COMMAND = re.compile(r"^\[\d+/\d+\] |^FAILED: |^ninja: ")
_SITE = re.compile(r"(?<![\w.])(?:/[^\s:'\"()/]+)+/(?:site|dist)-packages/")
_ABS_PATH = re.compile(r"(?<![\w.])(?:/[^\s:'\"()/]+)+/([^\s:'\"()/]+)")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.*))?$')


def strip_paths(text: str, names: Mapping[str, str] | None = None) -> str:
    """Replace known paths by the candidate's own names, then any other absolute path by its
    file name (library paths keep their package-relative part)."""
    for path, name in sorted((names or {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    text = _SITE.sub("", text)
    return _ABS_PATH.sub(lambda m: m.group(1), text)


def bound(text: str, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS,
          keep: str = "head") -> str:
    """At most `max_lines` lines and `max_chars` characters, saying what was dropped."""
    lines = text.strip("\n").splitlines()
    dropped = max(0, len(lines) - max_lines)
    lines = lines[:max_lines] if keep == "head" else lines[-max_lines:]
    out = "\n".join(line if len(line) <= 500 else line[:497] + "..." for line in lines)
    if len(out) > max_chars:
        out = out[:max_chars] if keep == "head" else out[-max_chars:]
        dropped = dropped or 1
    if dropped:
        note = f"[... {dropped} more lines not shown]"
        out = f"{out}\n{note}" if keep == "head" else f"{note}\n{out}"
    return out


def looks_like_compiler_output(text: str) -> bool:
    return bool(re.search(r"(: |\(\d+\): )(fatal )?error|Error building extension|ninja|nvcc|"
                          r"undefined reference", text))


def clean_compiler_output(text: str, names: Mapping[str, str] | None = None,
                          max_lines: int = MAX_LINES) -> str:
    """The first compiler/linker errors, each with its code and caret lines, paths stripped."""
    lines = [strip_paths(_ANSI.sub("", ln.rstrip()), names) for ln in text.splitlines()]
    lines = [ln for ln in lines if not _COMMAND.search(ln) and len(ln) < 2000]
    blocks: list[list[str]] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        if _ERROR.search(line) and not _NOT_ERROR.search(line):
            block = []
            if i > 0 and _CONTEXT.search(lines[i - 1]):
                block.append(lines[i - 1])
            block.append(line)
            j = i + 1
            while j < len(lines) and lines[j].strip() and not _DIAG.search(lines[j]) \
                    and not _ERROR.search(lines[j]) and j - i <= 3:
                block.append(lines[j])
                j += 1
            key = line.strip()
            if key not in seen:
                seen.add(key)
                blocks.append(block)
            i = j
        else:
            i += 1
    if not blocks:
        kept = [ln for ln in lines if ln.strip()]
        return bound("\n".join(kept), max_lines, keep="tail")
    out: list[str] = []
    for n, block in enumerate(blocks):
        if len(out) + len(block) > max_lines:
            out.append(f"[... {len(blocks) - n} more errors not shown]")
            break
        out.extend(ln for ln in block if not (out and ln == out[-1]))
    return bound("\n".join(out), max_lines + 1)


def clean_traceback(text: str, own_files: Mapping[str, str] | None = None,
                    max_lines: int = MAX_LINES) -> str:
    """The exception and the candidate's own frames; harness and library frames dropped.

    Args:
        text: output containing a Python traceback (the last one is used).
        own_files: path -> name for the candidate's files; frames elsewhere are dropped.
    """
    text = _ANSI.sub("", text)
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return clean_message(text, own_files, max_lines)
    lines = text[start:].splitlines()[1:]
    own = own_files or {}
    frames: list[str] = []
    i = 0
    while i < len(lines) and (_FRAME.match(lines[i]) or lines[i].startswith("    ")):
        m = _FRAME.match(lines[i])
        i += 1
        if not m:
            continue
        code = []
        while i < len(lines) and lines[i].startswith("    ") and not _FRAME.match(lines[i]):
            if lines[i].strip().strip("^~ "):
                code.append(lines[i])
            i += 1
        path = m.group(1)
        name = own.get(path) or next((v for k, v in own.items() if path.endswith(k)), None)
        if name:
            frames.append(f'  File "{name}", line {m.group(2)}, in {m.group(3)}')
            frames.extend(code[:1])
    exception = "\n".join(lines[i:]).strip()
    if looks_like_compiler_output(exception):
        head, _, rest = exception.partition("\n")
        build = re.match(r"(.*?Error building extension '[^']*')[:\s]*(.*)", head)
        if build:  # torch glues the first ninja command onto the exception line
            head, rest = build.group(1), f"{build.group(2)}\n{rest}"
        exception = head + ("\n" + clean_compiler_output(rest, own, max_lines - 10) if rest else "")
    else:
        exception = bound(strip_paths(exception, own), max_lines - len(frames))
    preamble = text[:text.find("Traceback (most recent call last):")].strip().splitlines()
    header = [strip_paths(ln, own) for ln in preamble[:3]]
    if frames:
        header += ["Traceback (the candidate's frames only):", *frames]
    return bound("\n".join([*header, exception]), max_lines + 5)


def clean_message(text: str, names: Mapping[str, str] | None = None,
                  max_lines: int = MAX_LINES) -> str:
    """Whatever a failing stage produced, cleaned by what it looks like, and bounded."""
    text = _ANSI.sub("", text or "")
    if "Traceback (most recent call last):" in text:
        return clean_traceback(text, names, max_lines)
    if looks_like_compiler_output(text):
        return clean_compiler_output(text, names, max_lines)
    return bound(strip_paths(text, names), max_lines, keep="tail")
