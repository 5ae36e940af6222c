"""Static screen: read the candidate's AST before anything runs it.

This is the cheap first line, not the defence: everything it rejects is also defended at run time
(the sandbox, the worker's guards). It exists so that a model gets a precise, line-numbered reason
for the obvious mistakes and tricks without waiting for a compile.
"""

from __future__ import annotations

import ast

from pydantic import BaseModel, ConfigDict, Field

from feedback.options import Backend
from problems.module import parse_python

# Modules whose import is refused: concurrency (timing must see all work), process control,
# foreign-function access, network, frame/heap walking, and the harness itself.
FORBIDDEN_MODULES = {
    "threading": "threads", "_thread": "threads", "multiprocessing": "processes",
    "concurrent": "threads/processes", "asyncio": "an event loop", "subprocess": "processes",
    "signal": "signal handlers", "pty": "processes", "ctypes": "raw memory access",
    "cffi": "raw memory access", "socket": "the network", "gc": "heap walking",
    "inspect": "frame walking", "importlib": "dynamic imports", "builtins": "builtins tampering",
    "problems": "the harness", "feedback": "the harness", "kernel_refine": "the harness",
}
FORBIDDEN_OS_CALLS = {"system", "popen", "fork", "forkpty", "kill", "killpg", "setsid", "spawnl",
                      "spawnv", "spawnve", "spawnlp", "spawnvp", "posix_spawn", "posix_spawnp",
                      "execv", "execve", "execl", "execlp", "execvp", "execvpe", "execle"}
FORBIDDEN_BUILTINS = {"eval": "dynamic code", "exec": "dynamic code", "compile": "dynamic code",
                      "__import__": "dynamic imports", "globals": "namespace access"}
FRAME_ATTRS = {"f_back", "f_locals", "f_globals", "tb_frame", "gi_frame", "__globals__",
               "__subclasses__", "__builtins__", "_getframe", "settrace", "setprofile",
               "__torch_function__", "__torch_dispatch__"}
REFERENCE_NAMES = {"Model", "get_inputs", "get_init_inputs"}
BUILD_CALLS = {"load_inline", "load"}


class Finding(BaseModel):
    """One thing the screen noticed."""

    model_config = ConfigDict(frozen=True)

    severity: str = Field(description="`error` rejects the candidate; `warning` is fed back only.")
    line: int | None = Field(description="1-based line in the candidate, when known.")
    what: str = Field(description="Short name of what was found, e.g. `import threading`.")
    message: str = Field(description="Why it matters, in words a model can act on.")

    def render(self) -> str:
        where = f"line {self.line}: " if self.line else ""
        return f"{where}{self.what}: {self.message}"


def _dotted(node: ast.AST) -> str:
    """`torch.nn.functional.relu` for an Attribute chain, '' when it is not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


class _Screen(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> imported module path
        self.has_model_new = False
        self.build_calls: list[ast.Call] = []
        self.triton_jit = False
        self.strings: list[str] = []

    def add(self, severity: str, node: ast.AST | None, construct: str, message: str) -> None:
        self.findings.append(Finding(severity=severity, line=getattr(node, "lineno", None),
                                     what=construct, message=message))

    def _module(self, name: str, node: ast.AST) -> None:
        root = name.split(".")[0]
        if root in FORBIDDEN_MODULES:
            self.add("error", node, f"import {name}",
                     f"{FORBIDDEN_MODULES[root]} are not allowed in a candidate")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._module(a.name, node)
            self.aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            self.add("error", node, f"from {'.' * node.level}{mod} import ...",
                     "relative imports reach outside the candidate's own file")
        self._module(mod, node)
        for a in node.names:
            if a.name in REFERENCE_NAMES:
                self.add("error", node, f"from {mod} import {a.name}",
                         "importing the reference problem is not allowed; write ModelNew yourself")
            if mod == "os" and a.name in FORBIDDEN_OS_CALLS:
                self.add("error", node, f"from os import {a.name}", "process control is not allowed")
            if mod == "sys" and a.name in {"modules", "_getframe", "settrace", "setprofile"}:
                self.add("error", node, f"from sys import {a.name}", "interpreter tampering")
            self.aliases[a.asname or a.name] = f"{mod}.{a.name}"
        self.generic_visit(node)

    def _resolved(self, node: ast.AST) -> str:
        """Dotted name with its first part replaced by what it was imported as."""
        dotted = _dotted(node)
        if not dotted:
            return ""
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    def _check_target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t)
            return
        if isinstance(target, ast.Attribute):
            name = self._resolved(target)
            head = _dotted(target).split(".")[0]
            if name and head in self.aliases:
                self.add("error", target, f"assignment to {name}",
                         "monkeypatching a module (torch, time, ...) is not allowed")
        if isinstance(target, ast.Subscript) and self._resolved(target.value) == "sys.modules":
            self.add("error", target, "sys.modules[...] = ...", "interpreter tampering")

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._check_target(t)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in FRAME_ATTRS:
            self.add("error", node, f".{node.attr}", "frame, heap or dispatch tampering is not allowed")
        elif self._resolved(node) == "sys.modules":
            self.add("error", node, "sys.modules", "interpreter tampering is not allowed")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = self._resolved(node.func)
        last = name.rsplit(".", 1)[-1]
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS \
                and node.func.id not in self.aliases:
            self.add("error", node, f"{node.func.id}()", f"{FORBIDDEN_BUILTINS[node.func.id]} is not allowed")
        if isinstance(node.func, ast.Name) and node.func.id in {"setattr", "delattr"} and node.args \
                and _dotted(node.args[0]).split(".")[0] in self.aliases:
            self.add("error", node, f"{node.func.id}({self._resolved(node.args[0])}, ...)",
                     "monkeypatching a module (torch, time, ...) is not allowed")
        if name.startswith("os.") and last in FORBIDDEN_OS_CALLS:
            self.add("error", node, f"{name}()", "process control is not allowed")
        if name in {"os._exit", "sys.exit", "exit", "quit"}:
            self.add("warning", node, f"{name}()", "exiting the process fails the evaluation")
        if self.is_build_call(node):
            self.build_calls.append(node)
        if "Stream" in last or name in {"torch.cuda.stream", "torch.cuda.set_stream"}:
            self.add("warning", node, f"{name}()", "work on a side stream is timed on the whole "
                     "device; it cannot hide from the timer")
        self.generic_visit(node)

    def is_build_call(self, node: ast.AST) -> bool:
        """A torch.utils.cpp_extension load_inline / load call."""
        if not isinstance(node, ast.Call):
            return False
        name = self._resolved(node.func)
        last = name.rsplit(".", 1)[-1]
        return last == "load_inline" or (last in BUILD_CALLS and "cpp_extension" in name)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            self.strings.append(node.value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [self._resolved(b) or _dotted(b) for b in node.bases]
        if node.name == "ModelNew":
            self.has_model_new = True
            if any(b.split(".")[-1] == "Model" for b in bases):
                self.add("error", node, "class ModelNew(Model)",
                         "subclassing the reference Model is not allowed; inherit nn.Module")
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    for sub in ast.walk(item):
                        if isinstance(sub, ast.Try):
                            self.add("error", sub, "try/except in forward", "a fallback around "
                                     "the kernel call hides failures; call the kernel unconditionally")
        if any(b.split(".")[-1] in {"Tensor", "Parameter"} for b in bases):
            self.add("error", node, f"class {node.name}(Tensor)", "tensor subclasses are not allowed")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            resolved = self._resolved(target)
            if resolved.startswith("triton") and resolved.endswith("jit"):
                self.triton_jit = True
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if any(self.is_build_call(c) for c in ast.walk(node)):
            self.add("error", node, "try/except around the build", "a fallback when the extension "
                     "fails to build hides the compile error; let it fail")
        self.generic_visit(node)


def _keywords(call: ast.Call) -> set[str]:
    return {k.arg for k in call.keywords if k.arg}


def _marker(screen: _Screen, backend: Backend) -> Finding | None:
    """The finding for a missing or wrong backend marker, if any."""
    calls = screen.build_calls
    if backend == "triton":
        if not screen.triton_jit:
            return Finding(severity="error", line=None, what="no @triton.jit kernel",
                           message="the triton backend needs at least one @triton.jit function")
        return None
    if not calls:
        return Finding(severity="error", line=None, what="no load_inline call",
                       message=f"the {backend} backend builds its kernels with "
                       "torch.utils.cpp_extension.load_inline")
    has_cuda = any("cuda_sources" in _keywords(c) for c in calls) or \
        any("__global__" in s for s in screen.strings)
    if backend == "cuda" and not has_cuda:
        return Finding(severity="error", line=calls[0].lineno, what="no CUDA source",
                       message="pass CUDA code (a __global__ kernel) through cuda_sources=")
    if backend == "cpp":
        if any("cuda_sources" in _keywords(c) for c in calls):
            return Finding(severity="error", line=calls[0].lineno, what="cuda_sources",
                           message="the cpp backend compiles C++ only (cpp_sources=, no cuda_sources=)")
        if not any("cpp_sources" in _keywords(c) or len(c.args) >= 2 for c in calls):
            return Finding(severity="error", line=calls[0].lineno, what="no cpp_sources",
                           message="pass the C++ code through cpp_sources=")
    return None


def screen(code: str, backend: Backend) -> list[Finding]:
    """All findings for a candidate; any `error` means static_reject."""
    try:
        tree = parse_python(code)
    except SyntaxError as exc:
        return [Finding(severity="error", line=exc.lineno, what="syntax error",
                        message=f"{exc.msg}" + (f": {exc.text.strip()}" if exc.text else ""))]
    s = _Screen()
    s.visit(tree)
    if not s.has_model_new and not any(isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "ModelNew" for t in n.targets) for n in tree.body):
        s.add("error", None, "no ModelNew", "define `class ModelNew(nn.Module)`")
    marker = _marker(s, backend)
    if marker:
        s.findings.append(marker)
    return sorted(s.findings, key=lambda f: (f.severity != "error", f.line or 0))


def render(findings: list[Finding], severity: str = "error") -> str:
    """The findings of one severity, one per line."""
    return "\n".join(f.render() for f in findings if f.severity == severity)
