"""Did the candidate's own compiled code run during a call? (issue 4, class 9)

A candidate with `try: ops.kernel(x) except: torch.relu(x)`, or `if FLAG:` / `if x.numel() > N:`
around its kernel, can pass correctness and timing on the library's path while its kernel never
runs. So every scored call the policy covers is made under `sys.setprofile`, which reports each
call of a C function from Python (`c_call`) and of a Python function (`call`):

- cpp / cuda: the functions of the candidate's `load_inline` extensions are pybind11 builtins
  whose `__module__` is the extension's name; the extensions are the shared objects mapped from
  the job's extensions directory (/proc/self/maps, so references the candidate hid still count);
- triton: a launch is a call of `JITFunction.run` whose `fn` was defined in the candidate's file.

Custom operators (`torch.ops.myns.op`) are seen by the dispatch recorder instead (ops.py, policy).
Limits: `sys.setprofile` sees calls from Python only; a kernel launched from native code that
Python never called directly (a C++ dispatcher kernel) is not counted here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

_JIT_RUN = os.path.join("triton", "runtime", "jit.py")


def extension_names(extensions_dir: str) -> frozenset[str]:
    """Names of the extension modules mapped into this process from `extensions_dir`."""
    root = os.path.realpath(extensions_dir) + os.sep
    names = set()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
                if path.endswith(".so") and os.path.realpath(path).startswith(root):
                    names.add(os.path.basename(path)[:-3])
    except OSError:
        pass
    return frozenset(names)


class OwnCode:
    """Counts calls into the candidate's own compiled code while `run` calls a function."""

    def __init__(self, extensions_dir: str, candidate_path: str) -> None:
        self.extensions_dir = extensions_dir
        self.files = {candidate_path, os.path.realpath(candidate_path)}
        self.names: frozenset[str] = frozenset()

    def refresh(self) -> None:
        """Re-read which extensions are loaded (after the import; cheap)."""
        self.names = extension_names(self.extensions_dir)

    def run(self, fn: Callable[[], Any]) -> tuple[Any, int]:
        """`fn()` and the number of own-code calls it made."""
        count = [0]
        names, files = self.names, self.files

        def profiler(frame, event, arg):
            if event == "c_call":
                if getattr(arg, "__module__", None) in names and _pybind(arg):
                    count[0] += 1
            elif event == "call" and frame.f_code.co_name == "run" \
                    and frame.f_code.co_filename.endswith(_JIT_RUN):
                target = getattr(frame.f_locals.get("self"), "fn", None)
                code = getattr(target, "__code__", None)
                if code is not None and code.co_filename in files:
                    count[0] += 1

        previous = sys.getprofile()
        sys.setprofile(profiler)
        try:
            out = fn()
        finally:
            sys.setprofile(previous if callable(previous) else None)
        return out, count[0]


def _pybind(fn: Any) -> bool:
    """A pybind11 function (its `__self__` is pybind's function record), not a builtin with a
    `__module__` rewritten to look like the candidate's."""
    return type(getattr(fn, "__self__", None)).__name__.startswith("pybind11_")
