"""load_module: fresh namespaces, size presets applied before get_inputs(), one-line errors."""

from __future__ import annotations

import pickle
import sys

import pytest
import torch

from problems import Problem, ProblemLoadError, load_module
from problems.loaders import problem_from_source

SIZED = '''
import dataclasses
import torch
import torch.nn as nn

N = 1024
SHAPE = (N, 2)          # derived at module level: must follow a preset of N
SIZES = {"small": {"N": 4}, "tiny": {"N": 2}}


@dataclasses.dataclass
class Config:            # dataclasses look the module up in sys.modules
    width: int = N


class Model(nn.Module):
    def __init__(self, width=N):   # default argument evaluated while the module runs
        super().__init__()
        self.width = width

    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_init_inputs():
    return [Config().width]
'''


def make(source: str = SIZED, origin: str = "sized.py") -> Problem:
    return problem_from_source(source, origin=origin, level=1, number=1, name="sized")


def test_each_load_is_a_fresh_module_of_its_own():
    problem = make()
    first, second = load_module(problem), load_module(problem)
    assert first is not second and first.__name__ != second.__name__
    assert first.Model is not second.Model
    first.N = 7
    assert second.N == 1024
    assert sys.modules[first.__name__] is first  # registered under a unique name only


def test_default_size_keeps_the_files_constants():
    module = load_module(make())
    assert module.N == 1024 and module.get_inputs()[0].shape == (1024, 2)
    assert load_module(make(), "default").N == 1024


def test_size_preset_reaches_derived_constants_and_default_arguments():
    module = load_module(make(), "small")
    assert module.N == 4 and module.SHAPE == (4, 2)
    assert module.get_inputs()[0].shape == (4, 2)
    assert module.get_init_inputs() == [4]
    assert module.Model().width == 4
    assert load_module(make(), "tiny").get_inputs()[0].shape == (2, 2)


def test_models_of_a_loaded_module_pickle():
    module = load_module(make())
    restored = pickle.loads(pickle.dumps(module.Model(3)))
    assert restored.width == 3


def test_unknown_size_lists_the_presets():
    with pytest.raises(ProblemLoadError, match=r"sized.py: unknown size 'huge' \(available: "
                                               r"default, small, tiny\)"):
        load_module(make(), "huge")


def test_preset_naming_a_constant_the_file_lacks_is_an_error():
    problem = make().model_copy(update={"sizes": {"small": {"M": 3}}})
    with pytest.raises(ProblemLoadError, match="sets M, which the file does not assign"):
        load_module(problem, "small")


def test_preset_of_a_tuple_assigned_constant_is_an_error():
    source = SIZED.replace("N = 1024", "N, K = 1024, 3")
    problem = make(source).model_copy(update={"sizes": {"small": {"N": 3}}})
    with pytest.raises(ProblemLoadError, match="plain `NAME = value`|does not assign"):
        load_module(problem, "small")


@pytest.mark.parametrize("source, message", [
    ("import torch\nx = (\n", r"bad.py:2: syntax error"),
    ("import kernelbench_no_such_module\n",
     r"bad.py:1: import error: No module named 'kernelbench_no_such_module'"),
    ("import torch\n\n\nN = 1 / 0\n", r"bad.py:4: ZeroDivisionError: division by zero"),
    ("def get_inputs():\n    return []\n", r"bad.py: no Model, no get_init_inputs defined"),
    ("Model = 3\ndef get_inputs(): pass\ndef get_init_inputs(): pass\n", r"bad.py: no Model"),
])
def test_errors_are_one_line_naming_the_file(source: str, message: str):
    problem = Problem(id="level1/1_bad", level=1, number=1, name="bad", source=source,
                      origin="bad.py")
    with pytest.raises(ProblemLoadError, match=message) as info:
        load_module(problem)
    assert "\n" not in str(info.value)


def test_failed_load_leaves_nothing_registered():
    problem = Problem(id="level1/1_boom", level=1, number=1, name="boom", source="raise KeyError(1)",
                      origin="boom.py")
    before = set(sys.modules)
    with pytest.raises(ProblemLoadError):
        load_module(problem)
    assert set(sys.modules) == before


def test_tracebacks_show_source_lines_even_without_a_file():
    source = SIZED.replace("return x * 2", "return x.no_such_method()")
    module = load_module(make(source, origin="parquet:kb.parquet#3"))
    with pytest.raises(AttributeError) as info:
        module.Model()(torch.ones(1))
    assert "x.no_such_method()" in str(info.getrepr())


def test_python_is_parsed_one_thread_at_a_time_everywhere():
    """CPython 3.11 can raise `SystemError: AST constructor recursion depth mismatch` when two
    threads parse at once (CI, Python 3.11.7, threads loading the suite); batches parse candidates
    in threads. Every parse of the project goes through `parse_python`, which waits for
    `AST_LOCK`."""
    import re
    import threading
    from pathlib import Path

    from problems.module import AST_LOCK, parse_python

    root = Path(__file__).resolve().parents[2]
    direct = [f"{path.relative_to(root)}:{n}"
              for folder in ("agent", "feedback", "problems", "experiments", "prompts")
              for path in sorted((root / folder).rglob("*.py"))
              if path.name != "module.py" or path.parent.name != "problems"
              for n, line in enumerate(path.read_text().splitlines(), 1)
              if re.search(r"\bast\.parse\(", line)]
    assert direct == []

    parsed = threading.Event()
    with AST_LOCK:
        worker = threading.Thread(target=lambda: (parse_python("x = 1"), parsed.set()))
        worker.start()
        assert not parsed.wait(0.3)  # waits for the lock
    assert parsed.wait(5)
    worker.join()
