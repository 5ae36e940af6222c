"""Build a candidate's precompiled headers in the trusted parent, before its build child starts.

Why: the build child sees the shared cache read-only (feedback/README.md), so it can only use a
PCH that already exists; and a PCH written by candidate code could be tampered with. The parent
reads the flags of each `load_inline` / `load` call from the candidate's source (literals only,
never by running it), keeps only flags on an allow-list (a flag such as `-wrapper` or `-fplugin=`
would run a program of the candidate's choosing here, outside the sandbox), asks torch for the
exact C++ flags of such a build, and builds the PCH the child will then look up by those flags.
Anything it cannot read or does not allow is skipped: the child then builds without a PCH.
"""

from __future__ import annotations

import ast
import logging
import re
import tempfile
from pathlib import Path

from feedback import fastbuild_pch
from problems.module import parse_python

log = logging.getLogger("feedback.fastbuild")

# Flags that only shape code generation or preprocessing; everything else disqualifies a call.
_ALLOWED_FLAG = re.compile(
    r"^-(O[0-3sgz]?|std=[\w+]+|[DU][A-Za-z_]\w*(=[\w.+-]*)?|W(?!l,|a,|p,)[\w=+-]*|w|g[0-3]?"
    r"|f(?!plugin)[\w=+.-]+|m(arch|tune|cpu)=[\w.-]+|m(avx|sse|fma|bmi|f16c)[\w.]*|pthread)$")


def prepare(code: str, backend: str, cache_dir: Path | str) -> list[Path]:
    """Make sure the PCHs the candidate's C++ translation units can use exist in `cache_dir`.

    Returns the headers that are ready (built now or before). Never raises.
    """
    from torch.utils import cpp_extension

    headers: list[Path] = []
    for extra_cflags, include_paths, with_cuda in build_calls(code, backend):
        try:
            flags = fastbuild_pch.pch_flags(torch_cflags(extra_cflags, include_paths, with_cuda))
            header = None if flags is None else fastbuild_pch.ensure_header(
                Path(cache_dir) / "pch", cpp_extension.get_cxx_compiler(), flags)
        except Exception as exc:  # noqa: BLE001 - preparing is an optimisation only
            log.warning("fastbuild: could not prepare a PCH (%s: %s)", type(exc).__name__, exc)
            continue
        if header is not None:
            headers.append(header)
    return headers


def build_calls(code: str, backend: str) -> list[tuple[list[str], list[str], bool]]:
    """(extra_cflags, extra_include_paths, with_cuda) of each build call whose C++ part is
    eligible: arguments given as literals, flags on the allow-list, no include folders of the
    candidate's (see fastbuild_pch.pch_flags), implicit headers on."""
    try:
        tree = parse_python(code)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        if name not in ("load_inline", "load"):
            continue
        kwargs = {k.arg: k.value for k in node.keywords if k.arg}
        try:
            cflags = _strings(kwargs.get("extra_cflags"))
            paths = _strings(kwargs.get("extra_include_paths"))
            implicit = not _literal(kwargs.get("no_implicit_headers"), False)
            with_cuda = backend != "cpp" and _with_cuda(name, node, kwargs)
        except ValueError:
            continue
        if implicit and not paths and all(_ALLOWED_FLAG.match(f.strip()) for f in cflags):
            found.append((cflags, paths, with_cuda))
    return found


def torch_cflags(extra_cflags: list[str], include_paths: list[str], with_cuda: bool) -> str:
    """The `$cflags` line torch writes for the C++ files of such a build (a dry run of torch's
    own ninja-file writer into a scratch folder; nothing is compiled)."""
    from torch.utils import cpp_extension

    with tempfile.TemporaryDirectory(prefix="kr-flags-") as tmp:
        ninja = Path(tmp) / "build.ninja"
        sources = [str(Path(tmp) / "main.cpp")] + ([str(Path(tmp) / "cuda.cu")] if with_cuda else [])
        cpp_extension._write_ninja_file_to_build_library(
            path=str(ninja), name="kr_flags", sources=sources, extra_cflags=list(extra_cflags),
            extra_cuda_cflags=["-arch=sm_90"],  # any arch flag: no GPU detection for a dry run
            extra_sycl_cflags=[], extra_ldflags=[], extra_include_paths=list(include_paths),
            with_cuda=with_cuda, with_sycl=False, is_standalone=False)
        lines = dict(ln.split(" = ", 1) for ln in ninja.read_text().splitlines()
                     if ln.startswith(("cflags = ", "post_cflags = ")))
    return " ".join(v for v in (lines.get("cflags", ""), lines.get("post_cflags", "")) if v)


def _with_cuda(name: str, node: ast.Call, kwargs: dict) -> bool:
    explicit = _literal(kwargs.get("with_cuda"), None)
    if explicit is not None:
        return bool(explicit)
    if name == "load_inline":
        cuda = kwargs.get("cuda_sources") or (node.args[2] if len(node.args) > 2 else None)
        return cuda is not None and not (isinstance(cuda, ast.Constant) and not cuda.value)
    sources = _strings(kwargs.get("sources") or (node.args[1] if len(node.args) > 1 else None))
    return any(s.endswith((".cu", ".cuh")) for s in sources)


def _strings(node: ast.expr | None) -> list[str]:
    value = _literal(node, [])
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("not a literal list of strings")
    return list(value)


def _literal(node: ast.expr | None, default):
    if node is None:
        return default
    return ast.literal_eval(node)  # ValueError for anything computed
