"""feedback.fastbuild: same results as a stock build, safe fallbacks, safe concurrent PCH builders.

The fast tests drive the PCH logic with a fake compiler (a script that answers like GCC); the
slow ones build real extensions with the real compiler and share one PCH (module-scoped cache).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from feedback import fastbuild, fastbuild_pch, fastbuild_prepare

FAKE_CXX = """#!{python}
import os, pathlib, sys, time
args = sys.argv[1:]
if args == ["-v"]:
    print("COLLECT_GCC=fake\\ngcc version 0.0 (fake)", file=sys.stderr)
    sys.exit(0)
with open(os.environ["FAKE_CXX_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if "c++-header" in args:
    time.sleep(float(os.environ.get("FAKE_CXX_SLEEP", "0")))
    pathlib.Path(args[args.index("-o") + 1]).write_text("gch")
    sys.exit(int(os.environ.get("FAKE_CXX_FAIL", "0")))
if "-H" in args:
    mark = "x" if os.environ.get("FAKE_CXX_REJECT") else "!"
    print(mark, args[args.index("-include") + 1] + ".gch", file=sys.stderr)
"""


@pytest.fixture
def fake_cxx(tmp_path, monkeypatch) -> str:
    script = tmp_path / "fake-c++"
    script.write_text(FAKE_CXX.format(python=sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_CXX_LOG", str(tmp_path / "calls.log"))
    return str(script)


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


# --- flags and eligibility ---------------------------------------------------------------------

def _torch_include() -> str:
    from torch.utils import cpp_extension

    return cpp_extension.include_paths("cpu")[0]


def test_pch_flags_drop_the_extension_name_and_keep_the_rest():
    inc = _torch_include()
    line = f"-DTORCH_EXTENSION_NAME=relu_cpp -DTORCH_API_INCLUDE_EXTENSION_H -isystem {inc} -fPIC -O3"
    assert fastbuild_pch.pch_flags(line) == f"-DTORCH_API_INCLUDE_EXTENSION_H -isystem {inc} -fPIC -O3"


@pytest.mark.parametrize("flag", ["-I/home/me/inc", "-isystem /home/me/inc", "-iquote q", "-nostdinc"])
def test_include_folders_other_than_torchs_make_a_tu_ineligible(flag):
    """GCC never checks whether a header changed since the PCH was built."""
    assert fastbuild_pch.pch_flags(f"-isystem {_torch_include()} {flag} -O3") is None


@pytest.mark.parametrize("flag", ["-include foo.h", "-imacros m.h", "-E", "-xc", "-save-temps",
                                  "-DX=$(whoami)", "-D'unbalanced", "-fno-pch-preprocess"])
def test_pch_flags_refuse_what_would_change_the_compile(flag):
    assert fastbuild_pch.pch_flags(f"-fPIC {flag} -O3") is None


@pytest.mark.parametrize("text,eligible", [
    ("#include <torch/extension.h>\nint f();\n", True),
    ("// a comment\n\n/* block\n comment */\n#  include <torch/extension.h>\n", True),
    ("#define FOO 1\n#include <torch/extension.h>\n", False),
    ("#include <vector>\n#include <torch/extension.h>\n", False),
    ("int x;\n", False),
])
def test_only_sources_that_start_with_the_torch_header_are_eligible(tmp_path, text, eligible):
    source = tmp_path / "main.cpp"
    source.write_text(text)
    assert fastbuild._starts_with_torch_header(source) is eligible


def test_a_compiler_that_is_not_gcc_gets_no_pch(tmp_path):
    assert fastbuild_pch.key_of("true", "-O3") is None
    assert fastbuild_pch.ensure_header(tmp_path, "true", "-O3") is None


# --- what the trusted parent prepares --------------------------------------------------------------

CALL = "from torch.utils.cpp_extension import load_inline\next = load_inline({args})\n"


@pytest.mark.parametrize("args,expected", [
    ("name='a', cpp_sources=src, functions=['f'], extra_cflags=['-O3']", [(["-O3"], [], False)]),
    ("name='a', cpp_sources=s, cuda_sources=cu, functions=['f']", [([], [], True)]),
    ("'a', s, cu", [([], [], True)]),
    ("name='a', cpp_sources=s, extra_cflags=flags", []),  # not a literal: skipped
    ("name='a', cpp_sources=s, extra_cflags=['-wrapper', 'sh,-c,id']", []),  # runs a program
    ("name='a', cpp_sources=s, extra_cflags=['-fplugin=/tmp/x.so']", []),
    ("name='a', cpp_sources=s, extra_include_paths=['inc']", []),
    ("name='a', cpp_sources=s, no_implicit_headers=True", []),
])
def test_the_parent_reads_only_literal_allowed_build_flags(args, expected):
    assert fastbuild_prepare.build_calls(CALL.format(args=args), "cuda") == expected


def test_the_parent_computes_the_flags_the_child_will_see():
    """torch's own ninja writer, dry-run: the -O3 and the torch include folders are there."""
    line = fastbuild_prepare.torch_cflags(["-O3"], [], with_cuda=False)
    assert "-O3" in line.split() and "-DTORCH_API_INCLUDE_EXTENSION_H" in line.split()
    assert fastbuild_pch.pch_flags(line) is not None


# --- the PCH cache with a fake compiler ---------------------------------------------------------

def test_a_pch_is_built_once_then_reused(tmp_path, fake_cxx):
    header = fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-fPIC -O3")
    assert header is not None and header.name == "kr_pch.h"
    assert (header.parent / "kr_pch.h.gch").read_text() == "gch"
    assert fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-fPIC -O3") == header
    builds = [c for c in _calls(tmp_path) if "c++-header" in c]
    assert len(builds) == 1
    other = fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-fPIC -O2")
    assert other is not None and other != header  # another flag set, another PCH


def test_a_cache_keeps_its_most_recently_used_pchs_and_rebuilds_an_evicted_one(
        tmp_path, fake_cxx, monkeypatch):
    """Each PCH is ~800 MB: past KERNEL_REFINE_PCH_KEEP, the least recently used one goes, but
    its header stays, so a build that already names it still compiles (from the header's text)."""
    monkeypatch.setenv(fastbuild_pch.KEEP_ENV, "2")
    root = tmp_path / "pch"
    o1, o2 = (fastbuild_pch.ensure_header(root, fake_cxx, f"-fPIC -O{n}") for n in (1, 2))
    os.utime(o1.parent / "ready", (1_000, 1_000))
    os.utime(o2.parent / "ready", (2_000, 2_000))
    assert fastbuild_pch.ensure_header(root, fake_cxx, "-fPIC -O1") == o1  # a use: O1 is newest
    o3 = fastbuild_pch.ensure_header(root, fake_cxx, "-fPIC -O3")
    assert sorted(r.parent for r in root.glob("*/ready")) == sorted([o1.parent, o3.parent])
    assert len(list(root.glob("*/kr_pch.h.gch"))) == 2
    assert o2.is_file() and not (o2.parent / "kr_pch.h.gch").exists()
    assert fastbuild_pch.ensure_header(root, fake_cxx, "-fPIC -O2") == o2  # built again
    assert (o2.parent / "kr_pch.h.gch").read_text() == "gch"
    assert len(list(root.glob("*/ready"))) == 2
    assert len([c for c in _calls(tmp_path) if "c++-header" in c]) == 4


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_pch_keep_value_names_the_variable(value, monkeypatch):
    monkeypatch.setenv(fastbuild_pch.KEEP_ENV, value)
    with pytest.raises(ValueError, match=f"{fastbuild_pch.KEEP_ENV}=.*whole number >= 1"):
        fastbuild_pch.keep()


def test_a_failed_pch_build_is_recorded_and_not_retried(tmp_path, fake_cxx, monkeypatch):
    monkeypatch.setenv("FAKE_CXX_FAIL", "1")
    assert fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-O3") is None
    assert fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-O3") is None
    assert len([c for c in _calls(tmp_path) if "c++-header" in c]) == 1
    assert list((tmp_path / "pch").glob("*/failed"))
    assert not list((tmp_path / "pch").glob("*/*.gch.tmp*"))


def test_a_pch_gcc_would_not_use_is_not_offered(tmp_path, fake_cxx, monkeypatch):
    monkeypatch.setenv("FAKE_CXX_REJECT", "1")
    assert fastbuild_pch.ensure_header(tmp_path / "pch", fake_cxx, "-O3") is None
    assert "GCC does not use the PCH" in next((tmp_path / "pch").glob("*/failed")).read_text()


def test_an_unwritable_cache_means_no_pch_and_no_error(tmp_path, fake_cxx):
    """As in a sandboxed child, where the cache is mounted read-only (here: under a file)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    assert fastbuild_pch.ensure_header(blocker / "pch", fake_cxx, "-O3") is None


def _ensure_in_child(root: str, cxx: str, log: str, queue) -> None:
    os.environ["FAKE_CXX_LOG"] = log
    os.environ["FAKE_CXX_SLEEP"] = "1.5"
    header = fastbuild_pch.ensure_header(Path(root), cxx, "-fPIC -O3")
    queue.put(str(header))


def test_two_processes_asking_for_the_same_pch_build_it_once(tmp_path, fake_cxx):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_ensure_in_child,
                         args=(str(tmp_path / "pch"), fake_cxx, str(tmp_path / "calls.log"), queue))
             for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    headers = {queue.get(timeout=5) for _ in procs}
    assert len(headers) == 1 and "None" not in headers
    assert len([c for c in _calls(tmp_path) if "c++-header" in c]) == 1


# --- install / fallback ----------------------------------------------------------------------------

def test_install_sets_and_uninstall_restores_the_environment(tmp_path, monkeypatch):
    from torch.utils import cpp_extension

    monkeypatch.setenv("MAX_JOBS", "7")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    original = cpp_extension._write_ninja_file
    with fastbuild.accelerated(tmp_path, arch="9.0", jobs=2, ccache="off"):
        assert os.environ["TORCH_CUDA_ARCH_LIST"] == "9.0"
        assert os.environ["MAX_JOBS"] == "2"
        assert os.environ["TORCH_NO_COMPILER_WRAPPER"] == "1"
        assert cpp_extension._write_ninja_file is not original
    assert cpp_extension._write_ninja_file is original
    assert os.environ["MAX_JOBS"] == "7"
    assert "TORCH_CUDA_ARCH_LIST" not in os.environ


def test_any_failure_in_the_accelerator_gives_the_stock_build(tmp_path, monkeypatch):
    from torch.utils import cpp_extension

    seen = {}
    monkeypatch.setattr(cpp_extension, "_write_ninja_file", lambda **kw: seen.update(kw))

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(fastbuild, "_pch_flags_for", broken)
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\n")
    with fastbuild.accelerated(tmp_path / "cache", ccache="off"):
        cpp_extension._write_ninja_file(path=str(tmp_path / "build.ninja"), cflags=["-O3"],
                                        post_cflags=None, sources=[str(source)])
    assert seen == {"path": str(tmp_path / "build.ninja"), "cflags": ["-O3"],
                    "post_cflags": None, "sources": [str(source)]}


def test_a_build_directory_keeps_its_decision(tmp_path, fake_cxx):
    """A later job must emit the command the build used, even if a PCH became ready since."""
    source = tmp_path / "build" / "main.cpp"
    source.parent.mkdir()
    source.write_text("#include <torch/extension.h>\n")
    stock = fastbuild.FastBuild(cache_dir=tmp_path / "cache", build_pch=False)
    assert fastbuild._decide(source.parent, fake_cxx, "-O3", [source], stock) is None
    fastbuild_pch.ensure_header(stock.pch_root, fake_cxx, "-O3")  # a PCH appears meanwhile
    assert fastbuild._decide(source.parent, fake_cxx, "-O3", [source], stock) is None
    source.write_text("#include <torch/extension.h>\nint changed();\n")  # a new build: decide anew
    assert fastbuild._decide(source.parent, fake_cxx, "-O3", [source], stock) is not None


# --- real builds (slow) ------------------------------------------------------------------------------

CPP_SOURCE = textwrap.dedent("""
    torch::Tensor scaled_relu(torch::Tensor x, double s) {
        auto y = torch::empty_like(x);
        const float* in = x.data_ptr<float>();
        float* out = y.data_ptr<float>();
        for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] > 0.f ? in[i] * (float)s : 0.f;
        return y;
    }
""")


def _build_and_run(ext_dir: str, cache: str | None, cflags: list[str], out: str) -> None:
    """In a fresh process: build the extension (accelerated when `cache`), record its output."""
    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    import torch
    from torch.utils.cpp_extension import load_inline

    if cache is not None:
        fastbuild.install(cache, ccache="off")
    ext = load_inline(name="kr_fastbuild_test", cpp_sources=CPP_SOURCE, functions=["scaled_relu"],
                      extra_cflags=cflags)
    x = torch.linspace(-3, 3, 1001)
    ninja = (Path(ext_dir) / "kr_fastbuild_test" / "build.ninja").read_text()
    Path(out).write_text(json.dumps({"y": ext.scaled_relu(x, 1.5).tolist(),
                                     "pch": "kr_pch.h" in ninja}))


def _start(*jobs: tuple) -> list:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_build_and_run, args=job) for job in jobs]
    for p in procs:
        p.start()
    return procs


def _results(procs: list, jobs: tuple) -> list[dict]:
    for p in procs:
        p.join(600)
        assert p.exitcode == 0
    return [json.loads(Path(job[3]).read_text()) for job in jobs]


def _in_processes(*jobs: tuple) -> list[dict]:
    return _results(_start(*jobs), jobs)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Iterator[Path]:
    if not shutil.which(os.environ.get("CXX", "c++")):
        pytest.skip("no C++ compiler")
    cache = tmp_path_factory.mktemp("fastbuild-cache")
    yield cache
    shutil.rmtree(cache, ignore_errors=True)  # its PCHs are ~800 MB each: not kept for pytest's tmp


@pytest.mark.slow
def test_concurrent_accelerated_builds_match_the_stock_build(tmp_path, shared_cache):
    """Two processes build at once into a cold cache: one PCH, both used it, stock's numbers."""
    fast_a, fast_b, stock = _in_processes(
        (str(tmp_path / "a"), str(shared_cache), ["-O2"], str(tmp_path / "a.json")),
        (str(tmp_path / "b"), str(shared_cache), ["-O2"], str(tmp_path / "b.json")),
        (str(tmp_path / "s"), None, ["-O2"], str(tmp_path / "s.json")))
    assert fast_a["pch"] and fast_b["pch"] and not stock["pch"]
    assert fast_a["y"] == stock["y"] == fast_b["y"]
    assert len(list((shared_cache / "pch").glob("*/ready"))) == 1
    assert not list((shared_cache / "pch").glob("*/*.tmp*"))


@pytest.mark.slow
def test_a_pch_built_for_other_flags_falls_back_to_a_correct_build(tmp_path, shared_cache):
    """A PCH GCC must reject (built at -O2, offered at -O0) is ignored by GCC: right numbers."""
    import torch
    from torch.utils import cpp_extension

    ready = next((shared_cache / "pch").glob("*/ready"), None)
    if ready is None:
        _in_processes((str(tmp_path / "w"), str(shared_cache), ["-O2"], str(tmp_path / "w.json")))
        ready = next((shared_cache / "pch").glob("*/ready"))
    # Plant the -O2 PCH as the "ready" PCH of the -O0 flag set, and check GCC refuses it there.
    flags = (ready.parent / "flags.txt").read_text().strip().replace("-O2", "-O0")
    cxx = cpp_extension.get_cxx_compiler()
    planted = shared_cache / "pch" / fastbuild_pch.key_of(cxx, flags)
    shutil.copytree(ready.parent, planted, copy_function=os.link)  # links: no second 800 MB
    job = (str(tmp_path / "f"), str(shared_cache), ["-O0"], str(tmp_path / "f.json"))
    build = _start(job)  # the build and the probe side by side
    assert fastbuild_pch._probe(planted, cxx, flags) is not None, "GCC accepted the planted PCH"
    (fast,) = _results(build, (job,))
    assert fast["pch"], "the planted PCH was not offered, so the fallback was not exercised"
    x = torch.linspace(-3, 3, 1001)
    assert fast["y"] == torch.where(x > 0, x * 1.5, torch.zeros_like(x)).tolist()
