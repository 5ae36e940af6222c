"""The evaluator: sandboxed compile -> correctness -> timing -> profile of candidate kernels.

Public names are imported lazily, so that `import feedback.result` (records only) does not pull
in torch and the process machinery. The entry point itself is `from feedback.evaluate import
evaluate` (the module of that name shadows a package attribute `evaluate`).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["EvalOptions", "EvalResult", "Evaluator", "LocalEvaluator", "RayEvaluator", "Status",
           "evaluate_many", "iter_evaluate", "make_evaluator"]

_WHERE = {"EvalOptions": "feedback.options", "EvalResult": "feedback.result",
          "Status": "feedback.result", "Evaluator": "feedback.api",
          "LocalEvaluator": "feedback.evaluate", "evaluate_many": "feedback.evaluate",
          "iter_evaluate": "feedback.evaluate", "make_evaluator": "feedback.executor",
          "RayEvaluator": "feedback.ray_executor"}  # needs the `ray` extra


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'feedback' has no attribute {name!r}")
