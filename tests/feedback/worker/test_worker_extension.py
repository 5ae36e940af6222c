"""A real C++ extension through the worker: correctness and the profile's own share on cpp.

Built through the evaluator's own compile stage (feedback/compile.py), with the extension shared
by the evaluator tests (tests/feedback/candidates.py), so a warm cache costs no build at all.
"""

from __future__ import annotations

import pytest

from feedback.options import EvalOptions
from feedback.result import Status

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(relu, cache_dir):
    from candidates import cpp_candidate

    from feedback.compile import compile_candidate, locate

    options = EvalOptions(size="small", cache_dir=cache_dir)
    paths = {}
    for call in ("relu", "relu_wrong"):
        code = cpp_candidate(call)
        outcome = compile_candidate(relu, code, "cpp", options)
        assert outcome.status == Status.ok, outcome.message
        paths[call] = locate(code, "cpp", options)
    return paths


def test_compiled_candidate_is_correct_and_its_time_is_its_own(kit, relu, cache_dir, built):
    paths = built["relu"]
    common = dict(candidate_path=paths.candidate, extensions_dir=paths.extensions_dir,
                  size="small", cache_dir=cache_dir)
    report = kit.run("correct", relu, None, **common)
    assert report.status == Status.ok, report.message
    profile = kit.run("profile", relu, None, **common).profile
    own = [r for r in profile.rows if r.own]
    assert own and own[0].name == "own:kr_test_ops.relu", profile.rows
    assert profile.own_share is not None and profile.own_share > 0


def test_compiled_wrong_candidate_is_a_mismatch(kit, relu, cache_dir, built):
    paths = built["relu_wrong"]
    report = kit.run("correct", relu, None, candidate_path=paths.candidate,
                     extensions_dir=paths.extensions_dir, size="small", cache_dir=cache_dir)
    assert report.status == Status.mismatch and report.correctness.trials_passed == 0
