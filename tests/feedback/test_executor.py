"""Choosing the executor: clear errors for an unknown name, a missing Ray, an address without Ray."""

from __future__ import annotations

import sys

import pytest

from feedback.evaluate import LocalEvaluator
from feedback.executor import ExecutorError, check_executor, make_evaluator


def test_unknown_executor_names_the_choices():
    with pytest.raises(ExecutorError, match="unknown executor 'dask': choose one of local, ray"):
        make_evaluator("dask")


def test_missing_ray_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ExecutorError, match=r"pip install 'kernel-refine\[ray\]'"):
        make_evaluator("ray")
    check_executor("local")  # the local executor never needs Ray


def test_an_address_needs_the_ray_executor():
    with pytest.raises(ExecutorError, match="only used with --executor ray"):
        check_executor("local", "auto")
    assert isinstance(make_evaluator("local"), LocalEvaluator)
