"""`--check`: the preflight alone, plus one minimal completion from a hosted model.

It says what a run would use (model and provider, backend and its tools, problems, output folder)
and stops; it creates nothing. A replayed model is not called (its file loading is the check).
"""

from __future__ import annotations

import asyncio

from agent.preflight import Preflight, PreflightError, preflight
from agent.settings import RunSettings

PROBE = [{"role": "user", "content": "Reply with the single word OK."}]
PROBE_MAX_TOKENS = 16


def check_run(settings: RunSettings) -> Preflight:
    """Preflight resolved SETTINGS and, for a hosted model, ask it for a few tokens.

    Raises:
        PreflightError: every failure, the model's answer included, one line each.
    """
    found = preflight(settings).raise_failures()
    if not settings.model.startswith("replay:"):
        found.uses["model answered"] = _probe(settings)
    return found


def _probe(settings: RunSettings) -> str:
    from agent.llm import LLMError, ReplayKey, make_client

    client = make_client(settings.model, llm_args={**settings.llm_args,
                                                   "max_tokens": PROBE_MAX_TOKENS},
                         max_retries=1, timeout_s=min(settings.llm_timeout_s, 120))
    try:
        done = asyncio.run(client.complete(PROBE, key=ReplayKey("check", 0, 0)))
    except LLMError as e:
        raise PreflightError([(f"the model did not answer a {PROBE_MAX_TOKENS}-token request: "
                              f"{e}")]) from None
    return (f"in {done.usage.latency_s:.2f} s ({done.usage.prompt_tokens} prompt + "
            f"{done.usage.completion_tokens} completion tokens)")


def describe(found: Preflight) -> list[str]:
    """What a run would use, as lines for a person."""
    width = max(map(len, found.uses), default=0)
    return (["check passed; a run would use:"]
            + [f"  {label:<{width}}  {value}" for label, value in found.uses.items()])
