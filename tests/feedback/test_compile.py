"""The compile stage and its cache, on real builds (shared with the other tests through the cache).

Only two C++ extensions are built by this whole directory on the cpp side: OPS_CPP (every
behaviour) and BROKEN_CPP; candidates that differ in Python only reuse the build.
"""

from __future__ import annotations

import secrets
import threading
import time

import pytest

from candidates import BROKEN_CPP, BROKEN_CUDA, cpp_candidate, cuda_candidate
from feedback import cache
from feedback.compile import compile_candidate, locate
from feedback.result import Status

pytestmark = pytest.mark.slow


def shared_object(paths):
    (so,) = list(paths.extensions_dir.glob("kr_test_*/*.so"))
    return so


def test_build_then_an_unchanged_source_is_a_cache_hit(relu, fast_options):
    code = cpp_candidate()
    first = compile_candidate(relu, code, "cpp", fast_options)
    assert first.status == Status.ok, first.message
    start = time.monotonic()
    again = compile_candidate(relu, code, "cpp", fast_options)
    assert again.cached and again.status == Status.ok
    assert time.monotonic() - start < 1.0
    assert locate(code, "cpp", fast_options).candidate.read_text() == code  # its own file


def test_an_outcome_whose_candidate_file_is_gone_is_built_again(relu, fast_options):
    code = cpp_candidate(extra=f"\n# {secrets.token_hex(4)}: its own cache entry\n")
    assert compile_candidate(relu, code, "cpp", fast_options).status == Status.ok
    paths = locate(code, "cpp", fast_options)
    paths.candidate.unlink()  # a cache pruned by hand: the outcome record stays
    again = compile_candidate(relu, code, "cpp", fast_options)
    assert again.status == Status.ok and not again.cached
    assert paths.candidate.read_text() == code


def test_python_only_edits_share_the_extension_build(relu, fast_options):
    base = locate(cpp_candidate(), "cpp", fast_options)
    assert compile_candidate(relu, cpp_candidate(), "cpp", fast_options).status == Status.ok
    built = shared_object(base).stat().st_mtime_ns
    edited = cpp_candidate(extra=f"\n# turn {secrets.token_hex(4)}: a Python-only edit\n")
    paths = locate(edited, "cpp", fast_options)
    assert paths.key != base.key and paths.extensions_dir == base.extensions_dir
    outcome = compile_candidate(relu, edited, "cpp", fast_options)
    assert outcome.status == Status.ok and not outcome.cached
    assert shared_object(paths).stat().st_mtime_ns == built  # ninja found nothing to rebuild


def test_concurrent_builds_of_the_same_source_are_safe(relu, fast_options):
    code = cpp_candidate(extra=f"\n# concurrent {secrets.token_hex(4)}\n")
    outcomes = []
    threads = [threading.Thread(target=lambda: outcomes.append(
        compile_candidate(relu, code, "cpp", fast_options))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [o.status for o in outcomes] == [Status.ok] * 3
    assert sorted(o.cached for o in outcomes) == [False, True, True]  # built exactly once
    record = cache.read_record(locate(code, "cpp", fast_options).outcome, type(outcomes[0]))
    assert record is not None and record.status == Status.ok


def test_a_broken_source_fails_with_the_compilers_words_and_is_remembered(relu, fast_options):
    code = cpp_candidate(source=BROKEN_CPP)
    first = compile_candidate(relu, code, "cpp", fast_options)
    assert first.status == Status.compile_error
    assert "main.cpp:" in first.message and "undefined_function" in first.message
    assert str(fast_options.cache_dir) not in first.message and "-isystem" not in first.message
    start = time.monotonic()
    again = compile_candidate(relu, code, "cpp", fast_options)
    assert time.monotonic() - start < 1.0
    assert again.cached and again.status == Status.compile_error and again.message == first.message


def test_cuda_compile_stage_builds_a_correct_source(relu, fast_options):
    outcome = compile_candidate(relu, cuda_candidate(), "cuda", fast_options)
    assert outcome.status == Status.ok, outcome.message
    paths = locate(cuda_candidate(), "cuda", fast_options)
    assert paths.arch and list(paths.extensions_dir.glob("kr_test_cuda_ops/*.so"))


def test_cuda_compile_stage_reports_nvcc_errors(relu, fast_options):
    outcome = compile_candidate(relu, cuda_candidate(source=BROKEN_CUDA), "cuda", fast_options)
    assert outcome.status == Status.compile_error
    assert "cuda.cu(" in outcome.message and "undefined_value" in outcome.message
    assert "nvcc -MD" not in outcome.message
