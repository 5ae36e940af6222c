"""A Python audit hook that stops candidate code from reaching into the harness (issue 4, 12-13).

Why a hook: candidate and trusted code share one interpreter, and the static screen reads source
only (`getattr(sys, "_get" + "frame")` passes it). PEP 578 audit hooks see the operations behind
every such trick at run time, and once added a hook cannot be removed or listed from Python.
The worker installs this one before the candidate is imported; from then on an operation below,
when candidate code asks for it, is refused (the call raises `PermissionError`) and recorded, and
the recorded attempt ends the job as a guard violation at the next integrity check (so a
candidate that swallows the `PermissionError` is still caught).

Refused (with the trick each one serves):
- frames and the heap: `sys._getframe`, `sys._current_frames`, `tb_frame`/`gi_frame`/`cr_frame`/
  `ag_frame`, `gc.get_objects`/`get_referrers`/`get_referents` (finding the harness, the job's
  nonce, the reference, expected outputs);
- tracing: `sys.settrace`, `sys.setprofile`, `sys.addaudithook`;
- `/proc/self/...` (and `/proc/<pid>`, `/dev/fd`, `/dev/std*`) opened, listed, entered or linked
  to (the report channel, process memory); for these, any
  frame of the candidate on the stack counts, so library code cannot serve as a proxy;
- `ctypes` (raw memory), new processes (with the candidate anywhere on the stack, unless build
  machinery stands between, see `_is_candidate`), signals to processes, sockets;
- `exec`/`eval`/`compile` and new code or function objects made by the candidate (code that
  would not carry the candidate's file name).

"Candidate code asks" means: the innermost Python frame that is not the standard library (or
frozen import machinery) belongs to the candidate's file, so `inspect.stack()` and `os.walk` count
as the candidate's own calls while torch's internal use of the same operations does not. For
`exec`/`compile` only the direct caller counts (the standard library compiles code for
`namedtuple` and `dataclass`, which honest candidates use).

Limits: native code (the candidate's own C++/CUDA) is not audited; neither are `os.write` on a
guessed descriptor or calls the candidate routes through torch functions. docs/security.md says
what covers those.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import MappingProxyType

_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_CODE_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__globals__"})
_BLOCKED = MappingProxyType({
    "sys._getframe": "frame walking", "sys._current_frames": "frame walking",
    "sys.settrace": "tracing the harness", "sys.setprofile": "tracing the harness",
    "sys.addaudithook": "audit hooks", "gc.get_objects": "heap walking",
    "gc.get_referrers": "heap walking", "gc.get_referents": "heap walking",
    "subprocess.Popen": "starting processes", "os.system": "starting processes",
    "os.exec": "starting processes", "os.posix_spawn": "starting processes",
    "os.spawn": "starting processes", "os.fork": "starting processes",
    "os.forkpty": "starting processes", "os.kill": "signalling processes",
    "os.killpg": "signalling processes", "code.__new__": "making code objects",
    "function.__new__": "making code objects",
})
_DIRECT = MappingProxyType({"exec": "dynamic code (exec/eval)", "compile": "dynamic code (compile)"})
_PREFIXES = (("ctypes.", "raw memory access (ctypes)"), ("socket.", "the network"))
_PATH_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.chdir", "os.symlink"})
_PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
                             "os.spawn", "os.fork", "os.forkpty"})
_TRUSTED_STOPS = (os.path.join("torch", "utils", "cpp_extension.py"),
                  os.path.join("feedback", "fastbuild.py"), os.path.join("feedback", "fastbuild_pch.py"),
                  os.path.join("feedback", "fastbuild_light.py"),
                  os.path.join("feedback", "fastbuild_prepare.py"), os.path.join("feedback", "sandbox.py"))
_TRUSTED_PACKAGES = (os.sep + os.path.join("site-packages", "triton") + os.sep,
                     os.sep + os.path.join("torch", "_inductor") + os.sep)
_PRIVATE_PATHS = ("/dev/fd", "/dev/std")
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


class AuditLog:
    """What one installed hook watches and what it caught.

    `watch` works once and `retire` for good, so code that finds a log (the worker keeps the live
    ones in `_LIVE` to retire them when a job ends in a test process) can switch its hook off but
    never back on, and `active` then says so at the next integrity check.
    """

    def __init__(self, files: set[str], attempts: list[str]) -> None:
        self._files, self._attempts = files, attempts
        self._state = "new"

    def watch(self, path: str) -> None:
        """From now on, code from `path` (the candidate's file) is audited."""
        if self._state == "new":
            self._files.update({path, os.path.realpath(path)})
            self._state = "watching"

    def retire(self) -> None:
        """Stop auditing, for good."""
        self._files.clear()
        self._state = "retired"

    @property
    def active(self) -> bool:
        return bool(self._files)

    def take(self) -> list[str]:
        """The attempts recorded so far (distinct, in order)."""
        return list(dict.fromkeys(self._attempts))


_LIVE: list[AuditLog] = []


def retire_all() -> None:
    """End every hook of this process (a job ended; in-process tests run many)."""
    while _LIVE:
        _LIVE.pop().retire()


def install() -> AuditLog:
    """Add a hook and return its log.

    The hook is a closure over everything it uses (bound now, as default arguments), and nothing
    but the interpreter and the returned log refers to it: candidate code can neither replace a
    helper it calls nor find it, short of the frame and heap walking the hook itself refuses.
    """
    files: set[str] = set()
    attempts: list[str] = []
    me: list = []

    def hook(event: str, args: tuple, _files=files, _attempts=attempts, _me=me,
             _classify=_classify, _is_candidate=_is_candidate, _getframe=sys._getframe,
             _direct=frozenset(_DIRECT), _anywhere=_PATH_EVENTS | _PROCESS_EVENTS, _repr=repr,
             _error=PermissionError) -> None:
        if not _files:
            return
        if event == "sys._getframe" and args and args[0].f_code is _me[0]:
            return  # a hook (this one or another job's) looking up its caller
        trick = _classify(event, args)
        if trick is None:
            return
        if _is_candidate(_getframe(0).f_back, _files, event in _direct, event in _anywhere):
            shown = ", ".join(_repr(a)[:60] for a in args[:2])
            _attempts.append(f"{trick}: the candidate called {event}({shown})")
            raise _error(f"refused by the evaluator: {trick} ({event}) is not allowed in a candidate")

    me.append(hook.__code__)
    sys.addaudithook(hook)
    log = AuditLog(files, attempts)
    _LIVE.append(log)
    return log


def _classify(event: str, args: tuple, _blocked=_BLOCKED, _direct=_DIRECT, _prefixes=_PREFIXES,
              _frame_attrs=_FRAME_ATTRS, _code_attrs=_CODE_ATTRS, _path_events=_PATH_EVENTS,
              _private=_PRIVATE_PATHS, _abspath=os.path.abspath, _isinstance=isinstance,
              _len=len, _str=str, _bytes=bytes, _int=int) -> str | None:
    """The trick an event serves, or None for an event the hook lets pass."""
    if event in _blocked:
        return _blocked[event]
    if event in _direct:
        return _direct[event]
    if event == "object.__getattr__":
        return "frame walking" if _len(args) > 1 and args[1] in _frame_attrs else None
    if event == "object.__setattr__":
        return "patching code" if _len(args) > 1 and args[1] in _code_attrs else None
    if event in _path_events and args:
        path = args[0]
        if _isinstance(path, _bytes):
            path = path.decode(errors="replace")
        if not _isinstance(path, _str):
            return None
        path = _abspath(path)
        head = path[6:].split("/", 1)[0] if path.startswith("/proc/") else ""
        private = path.startswith(_private) or head in ("self", "thread-self") or head.isdigit()
        if private or (event == "os.symlink" and path.startswith(("/proc", "/dev"))):
            return "reaching process internals (/proc/self, /dev/fd): the evaluator's channel"
        return None
    for prefix, trick in _prefixes:
        if event.startswith(prefix):
            return trick
    return None


def _is_candidate(frame, files: set[str], direct: bool, anywhere: bool, _stdlib=_STDLIB,
                  _stops=_TRUSTED_STOPS, _packages=_TRUSTED_PACKAGES) -> bool:
    """Whether the code asking is the candidate's (module docstring, "candidate code asks").

    `anywhere` (paths and processes): the candidate's code anywhere on the stack counts, unless
    build machinery (torch's cpp_extension, the evaluator's fastbuild and sandbox, Triton's and
    Inductor's compilers) stands between: numpy.savetxt or torch.save on /proc/self/fd/N, or the
    evaluator's own process launcher called directly, would otherwise serve as proxies."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name in files:
            return True
        if anywhere and (name.endswith(_stops) or any(p in name for p in _packages)):
            return False
        if direct or not (anywhere or name.startswith(_stdlib) or name.startswith("<frozen")):
            return False
        frame = frame.f_back
    return False
