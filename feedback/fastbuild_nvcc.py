"""nvcc with its two front ends side by side: the same commands as nvcc, the same object file.

Why: nvcc runs the steps of one `.cu` one after another: the host side (gcc -E, cudafe++), the
device side (gcc -E, cicc, ptxas, fatbinary), then the host compile. cudafe++ and cicc each
parse the whole translation unit (torch's headers), and only one thing ties them: cicc reads
the module id that cudafe++ writes when it is done. On the GPU machine's host a candidate's
build is nvcc's (ninja: the host binding 3.8 s, `cuda.cu` 15.0 s of 15.3 s); with the two sides
side by side, 8 builds at once took 21.6 s instead of 30.1 (median, same queue, run 66 in
docs/gpu-validation.md), for the same CPU seconds. On the 2-core CPU machine, nvcc alone on a
ReLU kernel that includes torch/types.h (a light `cuda.cu`): 17.3 s instead of 24.6.

How: torch's ninja file runs `$nvcc`; once torch has written the file, fastbuild sets that
variable to this script followed by the real nvcc (`use_in`; torch's own `PYTORCH_NVCC` did not
reach the ninja file with torch 2.11 on the GPU machine). The script asks that nvcc for its plan
(`--dryrun --keep`, its intermediate files in a folder of its own), writes the module id file
first, runs the host and the device steps in two threads, then the host compile, and prints each
step's output in nvcc's order, up to the first step that failed, whose exit status it returns: a
compile error reads as nvcc's. Steps after a failure in nvcc's order are stopped. The module id
has nvcc's shape, `_<crc32 of the source path>_<length>_<name>_<crc32 of the preprocessed host
source>` (nvcc's second hash is its own); it names the translation unit's internal symbols and
only has to be the same on both sides, which it is. With nvcc's own id in its place the object
file is nvcc's, byte for byte (tests/feedback/test_fastbuild_nvcc.py).

Anything but that plan (several architectures, relocatable device code, a preprocessing or
dependency-only run, options that print, a step another nvcc version adds) runs the real nvcc
as it is, and so does a failure of the script itself (nothing is printed before that).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import zlib
from dataclasses import dataclass

_ENV = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_DEPS = re.compile(r"^-- Filter Dependencies -- > (.+)$")
SIDE_BY_SIDE_MAX_BYTES = 24 << 20
"""A preprocessed host source larger than this runs cicc after cudafe++, as nvcc does. Two front
ends at once hold about twice the memory, and a build's processes share one memory limit
(`EvalOptions.memory_limit_mb`, 8 GB): a light torch TU is 14.6 MB preprocessed and cudafe++
peaked at 1.36 GB on it; torch/extension.h adds about a fifth; much larger ones (CUTLASS, say)
are not measured."""
_OWN = ("--dryrun", "-dryrun", "--keep", "-keep", "--keep-dir", "-keep-dir", "--save-temps",
        "-save-temps", "-time", "--time", "-v", "--verbose", "--version", "-V", "--help", "-h")
"""nvcc options this script does not run in parallel (they print, or place files themselves)."""


@dataclass
class Step:
    """One of nvcc's commands (a shell line, as `--dryrun` prints it)."""

    line: str
    output: bytes = b""
    status: int | None = None


@dataclass
class Plan:
    """nvcc's commands for one `-c` of one `.cu` for one architecture, by role."""

    env: dict[str, str]
    order: list[Step]
    host: list[Step]
    device: list[Step]
    final: Step
    module_id_file: str
    source_path: str
    host_ii: str


SCRIPT = os.path.abspath(__file__)


def command_for(build_ninja: str) -> str | None:
    """The `nvcc = ` line for the build whose ninja file is `build_ninja` (read before torch
    writes it again), or None (torch's own).

    A build keeps the nvcc line its ninja file already has (ninja rebuilds when a command line
    changes, and a job that imports a built candidate must not rebuild it): a build made with
    torch's own nvcc keeps it, one made with this script keeps that line while the script is
    there. A new build gets this script before the real nvcc, unless a compiler wrapper (ccache)
    would have wrapped nvcc or `PYTORCH_NVCC` is set already.
    """
    from torch.utils import cpp_extension

    if "PYTORCH_NVCC" in os.environ:
        return None
    real = cpp_extension._join_cuda_home("bin", "nvcc")
    wrap = getattr(cpp_extension, "_wrap_compiler", None)  # ccache/sccache, where torch has it
    if (wrap is not None and len(wrap(real)) > 1) or not os.path.isfile(real):
        return None
    mine = shlex.join([sys.executable, "-I", SCRIPT, real])
    old = nvcc_line(build_ninja)
    if old is None:
        return mine
    if not runs_script(old):
        return None
    words = shlex.split(old)
    return old if os.path.isfile(words[0]) and os.path.isfile(words[2]) else mine


def nvcc_line(build_ninja: str) -> str | None:
    """The ninja file's `nvcc` variable, or None (no file, or no such line)."""
    try:
        with open(build_ninja) as fh:
            return next((line[len("nvcc = "):].rstrip("\n") for line in fh
                         if line.startswith("nvcc = ")), None)
    except OSError:
        return None


def runs_script(line: str | None) -> bool:
    """Whether an `nvcc` line runs this script (`python -I fastbuild_nvcc.py real-nvcc`)."""
    try:
        words = shlex.split(line or "")
    except ValueError:
        return False
    return len(words) == 4 and words[1] == "-I" and os.path.basename(words[2]) == os.path.basename(SCRIPT)


def use_in(build_ninja: str, command: str) -> None:
    """Set the ninja file's `nvcc` variable to `command` (rewritten only when it changes)."""
    with open(build_ninja) as fh:
        text = fh.read()
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("nvcc = "):
            lines[i] = f"nvcc = {command}\n"
            break
    changed = "".join(lines)
    if changed != text:
        with open(build_ninja, "w") as fh:
            fh.write(changed)


def main(argv: list[str]) -> int:
    """`fastbuild_nvcc.py NVCC ARGS...`: run nvcc's plan for ARGS with its front ends in parallel,
    or NVCC itself."""
    real, args = argv[0], argv[1:]
    if any(a in _OWN or a.startswith(("--keep-dir=", "-keep-dir=")) for a in args) or "-c" not in args:
        return _exec(real, args)
    try:
        keep = tempfile.mkdtemp(prefix="kr-nvcc-")
    except OSError:
        return _exec(real, args)
    try:
        dry = subprocess.run([real, *args, "--dryrun", "--keep", "--keep-dir", keep],
                             capture_output=True, text=True, check=False)
        plan = parse(dry.stderr + dry.stdout) if dry.returncode == 0 else None
        status = run(plan) if plan is not None else None
    except Exception:  # noqa: BLE001 - the script failed: nvcc itself, below
        status = None
    finally:
        shutil.rmtree(keep, ignore_errors=True)
    return _exec(real, args) if status is None else status


def parse(text: str) -> Plan | None:
    """nvcc's `--dryrun` output as a Plan, or None when it is not the plan this script knows."""
    env: dict[str, str] = {}
    steps: list[tuple[str, Step]] = []
    deps_file = None
    for raw in text.splitlines():
        if not raw.startswith("#$ "):
            continue
        line = raw[3:].strip()
        if (m := _DEPS.match(line)) is not None:
            deps_file = m.group(1).strip()
            continue
        if (m := _ENV.match(line)) is not None:
            env[m.group(1)] = _unquote(m.group(2).strip())
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            return None
        steps.append((_role(words), Step(line)))
    roles = [r for r, _ in steps]
    by = dict(steps)
    if sorted(roles) != sorted(["pre-host", "pre-device", "cudafe", "cicc", "ptxas", "fatbinary", "final"]):
        return None
    cudafe, cicc = shlex.split(by["cudafe"].line), shlex.split(by["cicc"].line)
    module_id = _value(cudafe, "--module_id_file_name")
    if "--gen_module_id_file" not in cudafe or module_id is None \
            or _value(cicc, "--module_id_file_name") != module_id:
        return None
    pre_host = shlex.split(by["pre-host"].line)
    final = shlex.split(by["final"].line)
    source, host_ii, obj = _value(cudafe, "--orig_src_path_name"), _value(pre_host, "-o"), _value(final, "-o")
    if source is None or host_ii is None or obj is None:
        return None
    by["cudafe"].line, made = re.subn(r"\s--gen_module_id_file(?=\s|$)", "", by["cudafe"].line)
    if made != 1:
        return None
    if deps_file is not None:  # nvcc's -MF list: gcc's, of the device side (it has the sm_XX headers)
        by["pre-device"].line += f" -MD -MF {shlex.quote(deps_file)} -MT {shlex.quote(obj)}"
    return Plan(env=env, order=[s for _, s in steps],
                host=[by["pre-host"], by["cudafe"]],
                device=[by["pre-device"], by["cicc"], by["ptxas"], by["fatbinary"]],
                final=by["final"], module_id_file=module_id, source_path=source, host_ii=host_ii)


def module_id(source_path: str, host_ii: bytes) -> str:
    """nvcc's shape of a module id (module docstring)."""
    name = re.sub(r"[^A-Za-z0-9]", "_", os.path.basename(source_path))
    return f"_{zlib.crc32(source_path.encode()):08x}_{len(os.path.basename(source_path))}_{name}_" \
           f"{zlib.crc32(host_ii):08x}"


def run(plan: Plan, id_of=module_id) -> int | None:
    """Run the plan (module docstring); returns nvcc's exit status, or None when the script
    itself failed (nothing printed: the caller runs nvcc)."""
    steps = _Steps(plan.order, {**os.environ, **plan.env})
    host_ok, host_done = threading.Event(), threading.Event()
    serial: list[bool] = []
    broken: list[BaseException] = []

    def host() -> None:
        try:
            pre, cudafe = plan.host
            if steps.run(pre):
                with open(plan.host_ii, "rb") as fh:
                    text = fh.read()
                serial.append(len(text) > SIDE_BY_SIDE_MAX_BYTES)
                with open(plan.module_id_file, "w") as fh:
                    fh.write(id_of(plan.source_path, text))
                host_ok.set()
                steps.run(cudafe)
        except Exception as exc:  # noqa: BLE001 - reported as None: nvcc runs instead
            broken.append(exc)
        finally:
            host_ok.set()
            host_done.set()

    def device() -> None:
        try:
            pre, *rest = plan.device
            if steps.run(pre):
                host_ok.wait()  # the module id is written once the host side preprocessed
                if any(serial):
                    host_done.wait()
                for s in rest:
                    if not os.path.exists(plan.module_id_file) or not steps.run(s):
                        break
        except Exception as exc:  # noqa: BLE001
            broken.append(exc)

    threads = [threading.Thread(target=host), threading.Thread(target=device)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if broken:
        return None
    if all(s.status == 0 for s in plan.host + plan.device):
        steps.run(plan.final)
    for s in plan.order:  # nvcc's order, up to the first failure
        sys.stdout.buffer.write(s.output)
        sys.stdout.buffer.flush()
        if s.status != 0:
            return s.status if s.status is not None and s.status > 0 else 1
    return 0


class _Steps:
    """Runs steps through the shell, as nvcc does, keeping each one's output for `run` to print.
    Once a step fails, the steps after it in nvcc's order (which nvcc would not have run, and
    whose output is not printed) are stopped or not started."""

    def __init__(self, order: list[Step], env: dict[str, str]) -> None:
        self.order, self.env = order, env
        self.lock = threading.Lock()
        self.failed: int | None = None
        self.running: dict[int, subprocess.Popen] = {}

    def run(self, step: Step) -> bool:
        i = self.order.index(step)
        with self.lock:
            if self.failed is not None and self.failed < i:
                return False
            try:  # exec: the tool is the process a later failure stops
                proc = subprocess.Popen(["/bin/sh", "-c", "exec " + step.line], env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            except OSError as exc:
                proc = None
                step.output, step.status = f"{exc}\n".encode(), 1
            else:
                self.running[i] = proc
        if proc is not None:
            step.output = proc.communicate()[0]
            step.status = proc.returncode
        with self.lock:
            self.running.pop(i, None)
            if step.status != 0 and (self.failed is None or i < self.failed):
                self.failed = i
                for j, later in self.running.items():
                    if j > i:
                        later.kill()
        return step.status == 0


def _role(words: list[str]) -> str:
    tool = os.path.basename(words[0]) if words else ""
    out = _value(words, "-o") or ""
    if tool == "cudafe++":
        return "cudafe"
    if tool == "cicc":
        return "cicc"
    if tool in ("ptxas", "fatbinary"):
        return tool
    if "-E" in words and out.endswith(".cpp4.ii"):
        return "pre-host"
    if "-E" in words and out.endswith(".cpp1.ii"):
        return "pre-device"
    if "-c" in words and any(w.endswith(".cudafe1.cpp") for w in words):
        return "final"
    return f"other:{tool}"


def _value(words: list[str], option: str) -> str | None:
    """The word after the last `option` in `words`."""
    found = None
    for a, b in itertools.pairwise(words):
        if a == option:
            found = b
    return found


def _unquote(value: str) -> str:
    try:
        words = shlex.split(value)
    except ValueError:
        return value
    return words[0] if len(words) == 1 else value


def _exec(real: str, args: list[str]) -> int:
    os.execv(real, [real, *args])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
