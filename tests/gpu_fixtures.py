"""Every compiled fixture of the GPU tests, so `make gpu-check` can build them all first, in one
parallel pool sharing one cache, before any test runs (a cold CUDA build takes about a minute;
built one after another inside the tests they took most of the suite's time and competed with
its timing tests for the CPU).

A GPU test that compiles a new extension adds its candidate here. One that does not is still
correct, only slower: `gpu-check` reports every build that happened during the tests, so a
missing entry shows up there.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in ("feedback", "hardening"):
    sys.path.insert(0, str(HERE / folder))


def gpu_fixtures() -> list[tuple[object, str, str]]:
    """(problem spec, candidate source, backend) of each distinct build of the GPU tests."""
    import candidates
    import gpu_corpus

    relu = "suite:level1/19"
    found = [
        (relu, candidates.cuda_candidate("relu"), "cuda"),
        (relu, candidates.cuda_candidate(source=candidates.BROKEN_CUDA), "cuda"),
        (relu, gpu_corpus.cuda_candidate("return ops.relu(x)"), "cuda"),
    ]
    return (found + _more() + _transcript(HERE.parent / "experiments" / "demo" / "cuda_relu.jsonl")
            + _stability())


def _stability() -> list[tuple[object, str, str]]:
    """The CUDA kernels of the timing-stability short form (its build load is C++ of its own)."""
    from experiments.bench.stability_suite import kernels

    return [(k.problem()[0], k.code("cuda"), "cuda") for k in kernels("cuda", short=True)]


def _transcript(path: Path) -> list[tuple[object, str, str]]:
    """The CUDA kernels of a replay transcript (the Ray GPU smoke sweep replays this one)."""
    import json

    from agent.extract import extract_code

    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        code = extract_code(row["response"])
        if code is not None:
            out.append((f"suite:{row['problem']}", code, "cuda"))
    return out


def _more() -> list[tuple[object, str, str]]:
    """Fixtures of GPU test modules that define kernels of their own: each such module
    (`tests/**/test_*.py`) may expose `GPU_FIXTURES`, a list of (problem spec or `Problem`,
    source, backend)."""
    import importlib.util

    out = []
    for path in sorted(HERE.rglob("test_*.py")):
        if "GPU_FIXTURES" not in path.read_text():
            continue
        spec = importlib.util.spec_from_file_location(f"gpu_fixtures_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - a module that cannot import here adds none
            print(f"gpu_fixtures: {path.name} not imported ({exc}); its builds happen in its tests")
            continue
        out += list(getattr(module, "GPU_FIXTURES", []))
    return out
