"""A report as a list of blocks, rendered to Markdown and to one HTML page (PNGs beside it).

One structure, two renderings, so report.md and report.html can never disagree.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.tables import fmt, markdown_table


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[object]]
    caption: str = ""


@dataclass(frozen=True)
class Image:
    file: str
    alt: str


Block = Heading | Text | Table | Image


def to_markdown(blocks: Sequence[Block]) -> str:
    parts = []
    for b in blocks:
        if isinstance(b, Heading):
            parts.append(f"{'#' * b.level} {b.text}")
        elif isinstance(b, Text):
            parts.append(b.text)
        elif isinstance(b, Table):
            parts.append((f"*{b.caption}*\n\n" if b.caption else "")
                         + markdown_table(b.headers, b.rows))
        else:
            parts.append(f"![{b.alt}]({b.file})")
    return "\n\n".join(parts) + "\n"


_STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222}table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f3f3f3}
img{max-width:100%;border:1px solid #eee}caption{caption-side:top;text-align:left;
font-style:italic;padding:.3em 0}code{background:#f5f5f5}"""


def to_html(blocks: Sequence[Block], title: str) -> str:
    """One self-contained page (inline style, no scripts); images are the PNG files beside it."""
    body = []
    for b in blocks:
        if isinstance(b, Heading):
            body.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Text):
            body.append(f"<p>{html.escape(b.text)}</p>")
        elif isinstance(b, Table):
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.headers)
            rows = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in row)
                           + "</tr>" for row in b.rows)
            caption = f"<caption>{html.escape(b.caption)}</caption>" if b.caption else ""
            body.append(f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{rows}"
                        "</tbody></table>")
        else:
            body.append(f'<p><img src="{html.escape(b.file)}" alt="{html.escape(b.alt)}"></p>')
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}"
            f"</title><style>{_STYLE}</style></head>\n<body>\n" + "\n".join(body)
            + "\n</body></html>\n")
