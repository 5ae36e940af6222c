"""Where evaluations run: `local` (this machine, `LocalEvaluator`) or `ray` (a Ray cluster,
`feedback.ray_executor.RayEvaluator`). Both implement `feedback.api.Evaluator` and give the same
`EvalResult`s; `make_evaluator` is the one place that picks between them.
"""

from __future__ import annotations

from typing import Literal

from feedback.api import Evaluator

Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = ("local", "ray")
RAY_INSTALL = "pip install 'kernel-refine[ray]'  (or: pip install 'ray[default]')"


class ExecutorError(ValueError):
    """An executor that cannot be used here: unknown name, Ray missing, an address without Ray."""


def check_executor(executor: str, ray_address: str | None = None) -> None:
    """Raise ExecutorError unless `executor` can run here (before anything is started)."""
    if executor not in EXECUTORS:
        raise ExecutorError(f"unknown executor {executor!r}: choose one of {', '.join(EXECUTORS)}")
    if executor == "local" and ray_address:
        raise ExecutorError(f"a Ray address ({ray_address!r}) is only used with --executor ray")
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError as e:
            raise ExecutorError(f"--executor ray needs Ray, which is not installed: {RAY_INSTALL}"
                                ) from e


def make_evaluator(executor: str = "local", ray_address: str | None = None) -> Evaluator:
    """The evaluator for `executor`; `ray_address` is `auto`, `HOST:PORT` or None (Ray's own
    choice: RAY_ADDRESS, else the cluster last started on this machine, else a new local Ray)."""
    check_executor(executor, ray_address)
    if executor == "ray":
        from feedback.ray_executor import RayEvaluator

        return RayEvaluator(ray_address)
    from feedback.evaluate import LocalEvaluator

    return LocalEvaluator()
