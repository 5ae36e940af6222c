"""nvcc with its front ends side by side (feedback/fastbuild_nvcc.py): the plan it reads from nvcc,
the object file (nvcc's, byte for byte, given nvcc's module id), errors that read as nvcc's, what
it leaves to nvcc, and which nvcc line a build's ninja file gets. Real nvcc on small sources
without torch's headers (a few seconds each); no GPU needed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from feedback import fastbuild_nvcc

NVCC = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
needs_nvcc = pytest.mark.skipif(not NVCC.is_file(), reason="needs nvcc (CUDA_HOME)")

SOURCE = """#include <cstdio>
namespace { __device__ int hidden_count; int host_count; }
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = 2.f * x[i]; atomicAdd(&hidden_count, 1); }
}
void launch(const float* x, float* y, int n) { ++host_count; scale<<<(n + 255) / 256, 256>>>(x, y, n); }
"""
FLAGS = ["-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC", "-O3"]


def nvcc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(NVCC), *args], cwd=cwd, capture_output=True, text=True, check=False)


def driver(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The script as ninja runs it (PYTORCH_NVCC), output merged as ninja shows it."""
    return subprocess.run([sys.executable, "-I", fastbuild_nvcc.SCRIPT, str(NVCC), *args], cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)


def plan_for(tmp_path: Path, keep: Path, *args: str) -> fastbuild_nvcc.Plan | None:
    keep.mkdir()
    dry = nvcc(*args, "--dryrun", "--keep", "--keep-dir", str(keep), cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    return fastbuild_nvcc.parse(dry.stderr + dry.stdout)


@needs_nvcc
def test_the_plan_runs_the_two_front_ends_on_one_module_id(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    plan = plan_for(tmp_path, tmp_path / "keep", "-MD", "-MF", "k.o.d", "-c", "k.cu", "-o", "k.o", *FLAGS)
    assert plan is not None
    assert [os.path.basename(shlex.split(s.line)[0]) for s in plan.host][1] == "cudafe++"
    assert "cicc" in plan.device[1].line and "ptxas" in plan.device[2].line
    assert "--gen_module_id_file" not in plan.host[1].line  # it reads the id written first
    assert plan.module_id_file in plan.host[1].line and plan.module_id_file in plan.device[1].line
    assert "-MD -MF k.o.d -MT k.o" in plan.device[0].line  # nvcc's dependency file, written by gcc
    assert len(plan.order) == 7 and plan.final is plan.order[-1]
    ident = fastbuild_nvcc.module_id("/x/y/k.cu", b"text")
    assert ident.startswith("_") and "_4_k_cu_" in ident and len(ident) == len("_8d042529_4_k_cu_945d4ba1")


@needs_nvcc
def test_the_object_file_is_nvccs_byte_for_byte_with_nvccs_module_id(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as ninja runs it: in the build folder
    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "ref").mkdir()
    ref = nvcc("-MD", "-MF", "ref.o.d", "--keep", "--keep-dir", str(tmp_path / "ref"), "-c", "k.cu",
               "-o", "ref.o", *FLAGS, cwd=tmp_path)
    assert ref.returncode == 0, ref.stderr
    ident = (tmp_path / "ref" / "k.module_id").read_text()
    plan = plan_for(tmp_path, tmp_path / "mine", "-MD", "-MF", "mine.o.d", "-c", "k.cu", "-o", "mine.o", *FLAGS)
    assert plan is not None
    assert fastbuild_nvcc.run(plan, id_of=lambda *_: ident) == 0
    assert (tmp_path / "mine.o").read_bytes() == (tmp_path / "ref.o").read_bytes()

    def deps(name: str) -> set[str]:
        words = (tmp_path / name).read_text().replace("\\\n", " ").split()
        return {w for w in words if not w.endswith((":", ".o")) and w != ":"}
    assert deps("mine.o.d") == deps("ref.o.d") and "k.cu" in deps("mine.o.d")


@needs_nvcc
def test_its_own_module_id_gives_a_working_object_and_no_files_left(tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    before = set(os.listdir("/tmp"))
    done = driver("-MD", "-MF", "k.o.d", "-c", "k.cu", "-o", "k.o", *FLAGS, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    symbols = subprocess.run(["nm", "-C", str(tmp_path / "k.o")], capture_output=True, text=True,
                             check=True).stdout
    assert "launch(float const*, float*, int)" in symbols
    assert (tmp_path / "k.o.d").is_file()
    assert not {n for n in set(os.listdir("/tmp")) - before if n.startswith("kr-nvcc-")}


@needs_nvcc
@pytest.mark.parametrize("where, text", [
    ("host front end (cudafe++)", SOURCE + "int broken() { return undefined_name; }\n"),
    ("device preprocessing", SOURCE + "#ifdef __CUDA_ARCH__\n#error device side only\n#endif\n"),
    ("device front end (cicc)", SOURCE + "int on_host() { return 1; }\n"
                                         "__global__ void g(int* x) { x[0] = on_host(); }\n"),
    ("assembler (ptxas)", SOURCE + "__global__ void g() { asm(\"bogus.instruction;\"); }\n"),
])
def test_a_compile_error_reads_as_nvccs_and_fails_as_nvcc_does(tmp_path, where, text):
    (tmp_path / "k.cu").write_text(text)
    args = ("-MD", "-MF", "k.o.d", "-c", "k.cu", "-o", "k.o", *FLAGS)
    theirs = subprocess.run([str(NVCC), *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, check=False)
    mine = driver(*args, cwd=tmp_path)
    assert theirs.returncode != 0, where
    assert (mine.returncode, temp_names(mine.stdout)) == (theirs.returncode, temp_names(theirs.stdout))


def temp_names(text: str) -> str:
    """The output with the intermediate files' folder and prefix taken out (nvcc's own change
    from run to run: tmpxft_<pid>_...)."""
    return re.sub(r"/tmp/(?:kr-nvcc-[^/]+/|tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_)", "<tmp>/", text)


@needs_nvcc
def test_what_it_does_not_know_runs_nvcc_itself(tmp_path):
    assert driver("--version", cwd=tmp_path).stdout == nvcc("--version", cwd=tmp_path).stdout
    (tmp_path / "k.cu").write_text(SOURCE)
    two_archs = ("-c", "k.cu", "-o", "k.o", "-gencode=arch=compute_90,code=sm_90",
                 "-gencode=arch=compute_80,code=sm_80")
    assert plan_for(tmp_path, tmp_path / "keep", *two_archs) is None  # two cicc runs: nvcc's own
    done = driver(*two_archs, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert (tmp_path / "k.o").is_file()
    assert fastbuild_nvcc.parse("#$ cudafe++ --weird\n") is None


def test_a_build_keeps_the_nvcc_line_its_ninja_file_has(tmp_path, monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.delenv("PYTORCH_NVCC", raising=False)
    monkeypatch.setattr(cpp_extension, "_wrap_compiler", lambda c: [c] if isinstance(c, str) else c)
    monkeypatch.setattr(cpp_extension, "_join_cuda_home", lambda *p: str(NVCC))
    monkeypatch.setattr(os.path, "isfile", lambda p, real=os.path.isfile: p == str(NVCC) or real(p))
    ninja = tmp_path / "build.ninja"
    mine = fastbuild_nvcc.command_for(str(ninja))  # a new build
    assert mine is not None and shlex.split(mine)[1:] == ["-I", fastbuild_nvcc.SCRIPT, str(NVCC)]
    ninja.write_text(f"ninja_required_version = 1.3\nnvcc = {NVCC}\n")
    assert fastbuild_nvcc.command_for(str(ninja)) is None  # built by torch's own nvcc: kept
    moved = shlex.join([sys.executable, "-I", "/gone/feedback/fastbuild_nvcc.py", str(NVCC)])
    ninja.write_text(f"nvcc = {moved}\n")
    assert fastbuild_nvcc.command_for(str(ninja)) == mine  # its script is gone: this one
    ninja.write_text(f"nvcc = {mine}\n")
    assert fastbuild_nvcc.command_for(str(ninja)) == mine
    monkeypatch.setenv("PYTORCH_NVCC", "ccache nvcc")
    assert fastbuild_nvcc.command_for(str(tmp_path / "new" / "build.ninja")) is None
    monkeypatch.delenv("PYTORCH_NVCC")
    monkeypatch.setattr(cpp_extension, "_wrap_compiler", lambda c: ["ccache", c])
    assert fastbuild_nvcc.command_for(str(tmp_path / "new" / "build.ninja")) is None
    monkeypatch.delattr(cpp_extension, "_wrap_compiler")  # a torch without it
    assert fastbuild_nvcc.command_for(str(tmp_path / "new" / "build.ninja")) == mine


def test_a_failed_step_stops_the_steps_nvcc_would_not_have_run(tmp_path, capfd):
    """cudafe++ fails while cicc (later in nvcc's order, whose output is not printed) still runs:
    cicc is stopped, the host compile never starts, and the output ends at the failure."""
    (tmp_path / "k.cpp4.ii").write_text("preprocessed")
    lines = ["true", "sh -c 'sleep 0.3; echo host error; exit 2'", "true", "sleep 60", "true",
             "true", "echo never"]
    order = [fastbuild_nvcc.Step(line) for line in lines]
    plan = fastbuild_nvcc.Plan(env={}, order=order, host=order[:2], device=order[2:6], final=order[6],
                               module_id_file=str(tmp_path / "k.module_id"), source_path="k.cu",
                               host_ii=str(tmp_path / "k.cpp4.ii"))
    start = time.monotonic()
    assert fastbuild_nvcc.run(plan) == 2
    assert time.monotonic() - start < 30
    assert order[3].status is not None and order[3].status < 0  # stopped
    assert order[6].status is None
    assert capfd.readouterr().out == "host error\n"
    assert (tmp_path / "k.module_id").read_text().startswith("_")


@pytest.mark.parametrize("parallel", [True, False])
def test_fastbuild_gives_a_cuda_builds_ninja_file_the_script(tmp_path, monkeypatch, parallel):
    from torch.utils import cpp_extension

    from feedback import fastbuild

    monkeypatch.setattr(fastbuild_nvcc, "command_for", lambda path: f"driver for {Path(path).name}")

    def write_ninja_file(path, cflags, post_cflags, cuda_cflags, cuda_post_cflags, sources, with_cuda):
        nvcc = f"nvcc = {NVCC}\n" if with_cuda else ""
        Path(path).write_text(f"ninja_required_version = 1.3\ncxx = c++\n{nvcc}rule link\n")
    monkeypatch.setattr(cpp_extension, "_write_ninja_file", write_ninja_file)
    source = tmp_path / "cuda.cu"
    source.write_text("__global__ void k() {}\n")
    with fastbuild.accelerated(tmp_path / "cache", ccache="off", parallel_nvcc=parallel):
        for with_cuda in (True, False):
            ninja = tmp_path / f"{with_cuda}.ninja"
            cpp_extension._write_ninja_file(path=str(ninja), cflags=[], post_cflags=None,
                                            cuda_cflags=[], cuda_post_cflags=None,
                                            sources=[str(source)], with_cuda=with_cuda)
    cuda = (tmp_path / "True.ninja").read_text()
    assert cuda == ("ninja_required_version = 1.3\ncxx = c++\nnvcc = driver for True.ninja\nrule link\n"
                    if parallel else f"ninja_required_version = 1.3\ncxx = c++\nnvcc = {NVCC}\nrule link\n")
    assert "nvcc" not in (tmp_path / "False.ninja").read_text()


@needs_nvcc
def test_a_failure_of_the_script_itself_prints_nothing_and_leaves_it_to_nvcc(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.cu").write_text(SOURCE)
    plan = plan_for(tmp_path, tmp_path / "keep", "-c", "k.cu", "-o", "k.o", *FLAGS)

    def broken_id(*_):
        raise OSError("disk full")
    assert fastbuild_nvcc.run(plan, id_of=broken_id) is None  # main() then runs nvcc itself
    assert capfd.readouterr().out == ""
    monkeypatch.setattr(fastbuild_nvcc, "run", lambda plan: None)
    monkeypatch.setattr(fastbuild_nvcc.os, "execv", lambda path, argv: (_ for _ in ()).throw(
        SystemExit(f"exec {Path(path).name} {' '.join(argv[1:3])}")))
    with pytest.raises(SystemExit, match="exec nvcc -c k.cu"):
        fastbuild_nvcc.main([str(NVCC), "-c", "k.cu", "-o", "k.o", *FLAGS])


@pytest.mark.parametrize("limit, expected", [(1 << 30, ["cicc", "cudafe"]), (0, ["cudafe", "cicc"])])
def test_a_large_translation_unit_runs_its_front_ends_one_after_the_other(tmp_path, monkeypatch,
                                                                          limit, expected):
    """Two front ends at once hold twice the memory of one, under one limit for the build."""
    monkeypatch.setattr(fastbuild_nvcc, "SIDE_BY_SIDE_MAX_BYTES", limit)
    (tmp_path / "k.cpp4.ii").write_text("preprocessed")
    log = tmp_path / "log"
    lines = ["true", f"sh -c 'sleep 0.5; echo cudafe >> {log}'", "true", f"sh -c 'echo cicc >> {log}'",
             "true", "true", "true"]
    order = [fastbuild_nvcc.Step(line) for line in lines]
    plan = fastbuild_nvcc.Plan(env={}, order=order, host=order[:2], device=order[2:6], final=order[6],
                               module_id_file=str(tmp_path / "k.module_id"), source_path="k.cu",
                               host_ii=str(tmp_path / "k.cpp4.ii"))
    assert fastbuild_nvcc.run(plan) == 0
    assert log.read_text().split() == expected
