"""Problems: KernelBench-format reference programs, their loaders, and the project's own suite.

`select(spec)` is the one entry point CLIs use; `load_module(problem, size)` runs a problem in a
module of its own. See README.md in this folder.
"""

from problems.inputs import describe_inputs
from problems.loaders import (
    SUITE_ROOT,
    load_file,
    load_folder,
    load_parquet,
    load_suite,
    problem_from_source,
)
from problems.module import ProblemLoadError, load_module
from problems.record import Problem, Selection
from problems.spec import SpecError, matches, select

__all__ = [
    "SUITE_ROOT",
    "Problem",
    "ProblemLoadError",
    "Selection",
    "SpecError",
    "describe_inputs",
    "load_file",
    "load_folder",
    "load_module",
    "load_parquet",
    "load_suite",
    "matches",
    "problem_from_source",
    "select",
]
