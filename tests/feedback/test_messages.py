"""Message cleaning on compiler outputs recorded from real builds here (tests/feedback/data/)."""

from __future__ import annotations

from pathlib import Path

from feedback.messages import MAX_LINES, bound, clean_compiler_output, clean_message, clean_traceback

DATA = Path(__file__).parent / "data"
CANDIDATES = {  # the build-cache paths of the recorded candidates
    "/tmp/krcache/build/bb0fea7f5725601523be6ed081f29642/candidate.py": "candidate.py",
    "/tmp/krcache/build/ef8c982051dc89e73c61d25374b29f00/candidate.py": "candidate.py",
}


def test_gcc_error_keeps_the_error_with_its_code_and_drops_the_build_noise():
    text = clean_message((DATA / "build_error_gcc.txt").read_text(), CANDIDATES)
    assert "main.cpp:5:12: error: ‘undefined_function’ was not declared in this scope" in text
    assert "return undefined_function(x);" in text and "^~~~" in text
    assert "In function ‘at::Tensor relu(at::Tensor)’" in text
    assert 'File "candidate.py", line 12, in <module>' in text
    for noise in ("/tmp/krcache", "/work/main", "-isystem", "ninja", "subprocess.py",
                  "cpp_extension.py", "loading.py", "site-packages", "[1/2]"):
        assert noise not in text, noise
    assert len(text.splitlines()) <= 12


def test_nvcc_error_is_named_by_the_candidates_own_file():
    text = clean_message((DATA / "build_error_nvcc.txt").read_text(), CANDIDATES)
    assert 'cuda.cu(8): error: identifier "undefined_value" is undefined' in text
    assert "undefined_value;" in text
    assert "RuntimeError: Error building extension 'kr_test_cuda_ops'" in text
    assert "/tmp/" not in text and "nvcc -MD" not in text and "No CUDA runtime" not in text


def test_many_errors_are_deduplicated_and_bounded():
    one = ("/x/build/ext/ab/ops/main.cpp:{n}:1: error: expected ';' before '}}' token\n"
           "   {n} | int a = 1\n      |          ^\n")
    raw = "".join(one.format(n=i % 100) for i in range(1000)) * 2
    text = clean_compiler_output(raw)
    assert len(text.splitlines()) <= MAX_LINES + 1
    assert "more errors not shown" in text
    lines = [ln for ln in text.splitlines() if "error:" in ln]
    assert len(lines) == len(set(lines)) and lines[0].startswith("main.cpp:0:1: error")


def test_linker_and_import_errors_are_kept():
    raw = ("/usr/bin/ld: main.o: in function `f':\nmain.cpp:(.text+0x1): undefined reference to "
           "`g()'\ncollect2: error: ld returned 1 exit status\n")
    text = clean_compiler_output(raw)
    assert "undefined reference to `g()'" in text and "ld returned 1" in text


HARNESS_TRACEBACK = '''\
ModelNew.forward raised:
Traceback (most recent call last):
  File "/work/main/feedback/worker/harness.py", line 140, in call_candidate
    output = h.candidate(*args)
             ^^^^^^^^^^^^^^^^^^
  File "/work/main/.venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1775, in _wrapped_call_impl
    return self._call_impl(*args, **kwargs)
  File "/cache/build/0123/candidate.py", line 31, in forward
    return self.helper(x)
  File "/cache/build/0123/candidate.py", line 27, in helper
    return ops.relu(x.view(3, -1))
                    ^^^^^^^^^^^^^
RuntimeError: shape '[3, -1]' is invalid for input of size 16384
'''


def test_traceback_keeps_the_candidates_frames_and_the_exception_only():
    text = clean_traceback(HARNESS_TRACEBACK, {"/cache/build/0123/candidate.py": "candidate.py"})
    assert text.splitlines() == [
        "ModelNew.forward raised:",
        "Traceback (the candidate's frames only):",
        '  File "candidate.py", line 31, in forward',
        "    return self.helper(x)",
        '  File "candidate.py", line 27, in helper',
        "    return ops.relu(x.view(3, -1))",
        "RuntimeError: shape '[3, -1]' is invalid for input of size 16384",
    ]


def test_plain_messages_are_bounded_from_the_end():
    text = clean_message("\n".join(f"line {i}" for i in range(10_000)))
    assert text.splitlines()[-1] == "line 9999" and len(text.splitlines()) <= MAX_LINES + 1
    assert len(bound("x" * 10**6)) < 10_000
