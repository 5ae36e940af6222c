"""Logs are for people: structlog to stderr (console or JSON) and to the run's log file.

Configured once per run by the entry point. Each trajectory binds run / problem / trajectory in
its own context (`bind_trajectory`); nodes add the turn. The run store, not the log, is the data.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import structlog

_HANDLER_TAG = "_kernel_refine"


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever `sys.stderr` is now (rich's live display swaps it while it runs)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextmanager
def logging_to(log_format: Literal["console", "json"], log_file: Path) -> Iterator[None]:
    """Log to stderr and `log_file` for the duration of a run; the file is closed afterwards."""
    file_handler = configure_logging(log_format, log_file)
    try:
        yield
    finally:
        if file_handler is not None:
            logging.getLogger().removeHandler(file_handler)
            file_handler.close()


def configure_logging(log_format: Literal["console", "json"] = "console",
                      log_file: Path | None = None,
                      level: int = logging.INFO) -> logging.Handler | None:
    """Route structlog through stdlib logging to stderr and, when given, to `log_file` (whose
    handler is returned)."""
    pre_chain = [structlog.contextvars.merge_contextvars, structlog.stdlib.add_log_level,
                 structlog.stdlib.add_logger_name, structlog.processors.TimeStamper(fmt="iso")]
    structlog.configure(
        processors=[*pre_chain, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False)
    if log_format == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())

    def formatter(render) -> logging.Formatter:
        return structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=pre_chain,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, render])

    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, _HANDLER_TAG, False)]:
        root.removeHandler(handler)
        handler.close()
    handlers: list[logging.Handler] = [_StderrHandler()]
    handlers[0].setFormatter(formatter(renderer))
    if log_file is not None:
        file_handler = logging.FileHandler(log_file, encoding="utf-8")
        file_render = (renderer if log_format == "json"
                       else structlog.dev.ConsoleRenderer(colors=False))
        file_handler.setFormatter(formatter(file_render))
        handlers.append(file_handler)
    for handler in handlers:
        setattr(handler, _HANDLER_TAG, True)
        root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("LiteLLM", "litellm", "httpx", "httpcore", "aiosqlite", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handlers[1] if log_file is not None else None


def bind_trajectory(run: str, problem: str, trajectory: int) -> None:
    """Bind the trajectory's identity for every log line of the current async task."""
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(run=run, problem=problem, trajectory=trajectory)
