"""The light nvcc translation unit (feedback/fastbuild_light.py): which builds get it, that the
choice is kept for the build's later imports, and that a failed light build is built stock."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from feedback import fastbuild_light, fastbuild_nvcc

KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 0.f; }\n"


def arguments(tmp_path, cu_text: str, with_cuda: bool = True, post: list[str] | None = None) -> dict:
    build = tmp_path / "ext"
    build.mkdir(exist_ok=True)
    (build / "main.cpp").write_text("#include <torch/extension.h>\n")
    (build / "cuda.cu").write_text(cu_text)
    return {"path": str(build / "build.ninja"), "sources": [str(build / "main.cpp"), str(build / "cuda.cu")],
            "with_cuda": with_cuda, "cuda_cflags": ["-O3"], "cuda_post_cflags": post or ["--use_fast_math"]}


def test_only_cuda_sources_that_include_the_torch_extension_header_build_light(tmp_path):
    light = arguments(tmp_path, "#include <torch/types.h>\n#include <torch/extension.h>\n" + KERNEL)
    assert fastbuild_light.flags_for(light) == fastbuild_light.flag()
    assert fastbuild_light.SHIM.joinpath("torch", "extension.h").is_file()
    assert fastbuild_light.flags_for(arguments(tmp_path, "#include <torch/types.h>\n" + KERNEL)) == []
    assert fastbuild_light.flags_for(arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL,
                                               with_cuda=False)) == []


def test_a_build_keeps_its_choice_while_its_cuda_sources_and_flags_are_unchanged(tmp_path):
    args = arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL)
    record = tmp_path / "ext" / fastbuild_light.RECORD
    assert fastbuild_light.flags_for(args) == fastbuild_light.flag()
    fingerprint = json.loads(record.read_text())["fingerprint"]
    record.write_text(json.dumps({"fingerprint": fingerprint, "light": False}))  # failed light once
    assert fastbuild_light.flags_for(args) == []  # the same command line as its stock build
    changed = arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL, post=["-O2"])
    assert fastbuild_light.flags_for(changed) == fastbuild_light.flag()  # new flags: tried again


def test_a_build_made_before_light_builds_existed_keeps_its_command_lines(tmp_path):
    """A cache from an earlier version: its build.ninja has no light flag and no record sits
    beside it; a light flag now would make ninja rebuild it inside the job that imports it."""
    args = arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL)
    (tmp_path / "ext" / "build.ninja").write_text(ninja_file(tmp_path, light=False))
    assert fastbuild_light.flags_for(args) == []
    assert fastbuild_light.flags_for(args) == []  # and so on, from its record


def ninja_file(tmp_path, light: bool) -> str:
    extra = " " + " ".join(fastbuild_light.flag()) if light else ""
    return f"cuda_cflags = -O3\ncuda_post_cflags = --use_fast_math{extra}\nbuild cuda.cuda.o: cuda_compile cuda.cu\n"


def test_a_failed_light_build_is_built_again_the_stock_way_and_remembered(tmp_path):
    args = arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL)
    fastbuild_light.flags_for(args)
    build = tmp_path / "ext"
    (build / "build.ninja").write_text(ninja_file(tmp_path, light=True))
    seen = []

    def ninja(directory, verbose, error_prefix):
        text = (build / "build.ninja").read_text()
        seen.append(text)
        if "light_headers" in text:
            raise RuntimeError(f"{error_prefix}: 'torch::nn' has no member 'functional'")

    fastbuild_light.run_with_fallback(ninja, str(build), False, "Error building extension")
    assert len(seen) == 2 and seen[1] == ninja_file(tmp_path, light=False)
    assert json.loads((build / fastbuild_light.RECORD).read_text())["light"] is False
    assert fastbuild_light.flags_for(args) == []  # its later imports: the stock command line
    assert fastbuild_light.went_light(tmp_path) is False


def test_what_a_build_folder_says_about_light_builds(tmp_path):
    assert fastbuild_light.went_light(tmp_path) is None  # no CUDA source asked for it
    fastbuild_light.flags_for(arguments(tmp_path, "#include <torch/extension.h>\n" + KERNEL))
    assert fastbuild_light.went_light(tmp_path) is True


def test_a_stock_build_that_fails_fails_once_with_its_own_error(tmp_path):
    build = tmp_path / "ext"
    build.mkdir()
    (build / "build.ninja").write_text(ninja_file(tmp_path, light=False))
    calls = []

    def ninja(directory, verbose, error_prefix):
        calls.append(directory)
        raise RuntimeError("cuda.cu(3): error: identifier \"undefined_value\" is undefined")

    with pytest.raises(RuntimeError, match="undefined_value"):
        fastbuild_light.run_with_fallback(ninja, str(build), False, "Error building extension")
    assert len(calls) == 1


# --- real builds through the evaluator's compile stage (nvcc, no GPU needed) ----------------------

RELU = Path(__file__).resolve().parents[2] / "experiments/bench/candidates/cuda/level_1_problem_19_sample_0_kernel.py"
NEEDS_THE_CPP_FRONTEND = ("    auto y = torch::empty_like(x);\n",
                          ("    auto y = torch::empty_like(x);\n"
                           "    torch::nn::functional::ReLUFuncOptions options(false);  // torch/all.h\n"
                           "    (void)options;\n"))


def _reimport(code: str, ext_dir: Path, cache: Path, arch: str) -> None:
    """Import the built candidate in a fresh process as a worker job does (fastbuild installed
    over the same cache): a changed nvcc command line would rebuild it."""
    script = ("import os, sys\n"
              f"os.environ['TORCH_EXTENSIONS_DIR'] = {str(ext_dir)!r}\n"
              f"os.environ['TORCH_CUDA_ARCH_LIST'] = {arch!r}\n"
              "from feedback import fastbuild\n"
              f"fastbuild.install({str(cache)!r})\n"
              f"exec(compile(sys.stdin.read(), 'candidate', 'exec'), {{'__name__': 'candidate'}})\n")
    done = subprocess.run([sys.executable, "-c", script], input=code, capture_output=True,
                          text=True, timeout=600, check=False, cwd=Path(__file__).resolve().parents[2],
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 0, done.stderr[-3000:]


def _files(folder: Path) -> dict[str, int | list[str]]:
    """Every file under `folder` with its modification time (a rebuild writes objects anew), but
    `build.ninja` with its lines: torch writes it again at each load (after a failed light build,
    an empty `cuda_post_cflags =` comes back with a trailing space)."""
    return {str(p.relative_to(folder)): [line.rstrip() for line in p.read_text().splitlines()]
            if p.name == "build.ninja" else p.stat().st_mtime_ns
            for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_a_cuda_candidate_builds_light_and_one_that_needs_more_builds_stock(relu, fast_options):
    from feedback.compile import compile_candidate, locate
    from feedback.result import Status

    light = RELU.read_text()
    stock = light.replace(*NEEDS_THE_CPP_FRONTEND)
    assert stock != light
    for code in (light, stock):  # built here, not found in the shared cache from before
        paths = locate(code, "cuda", fast_options)
        shutil.rmtree(paths.directory, ignore_errors=True)
        shutil.rmtree(paths.extensions_dir, ignore_errors=True)
    with ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda code: compile_candidate(relu, code, "cuda", fast_options),
                              (light, stock)))
    for code, outcome, expected in zip((light, stock), built, (True, False)):
        assert outcome.status == Status.ok, outcome.message
        paths = locate(code, "cuda", fast_options)
        (build,) = [p.parent for p in paths.extensions_dir.glob("*/build.ninja")]
        assert json.loads((build / fastbuild_light.RECORD).read_text())["light"] is expected
        assert ("light_headers" in (build / "build.ninja").read_text()) is expected
        assert f"-I {fastbuild_nvcc.SCRIPT} " in (build / "build.ninja").read_text()  # both sides at once
        assert fastbuild_light.went_light(paths.extensions_dir) is expected
        assert list(build.glob("*.so"))
        before = _files(build)
        _reimport(code, paths.extensions_dir, Path(fast_options.cache_dir), paths.arch)
        assert _files(build) == before  # the same command lines: nothing rebuilt or added
