"""The faults batch of issue 4: 50 candidates mixing honest kernels with every way a candidate can
fail the process (segfaults, hangs, memory past the limit, descriptors, output floods, child
processes, exits, exceptions, writes outside scratch, the network).

Most are Python around the shared extension (no new C++ build); identical sources are repeated,
so the compile cache builds each once while every copy gets its own correctness child.
"""

from __future__ import annotations

from dataclasses import dataclass

from cases import candidate, relu

from feedback.environment import REPO_ROOT
from feedback.result import Status

TIMEOUT_S = 20
"""The batch's time limit per job. It was 8 s; since correctness infers the input contract from
extra draws and judges constant answers too (issue 12), the honest naive-matmul candidate's
correctness run passed 8 s on the 2-core CI machine while the batch's cold builds ran beside it
(three runs of 2026-12-01; the honest median was 4.0 s, the slowest honest evaluation 4.5 s with
the builds cached), so it was refused as a hang."""
BATCH_OPTIONS = {"time": False, "run_timeout_s": TIMEOUT_S, "memory_limit_mb": 5000}
MARKER = REPO_ROOT / "feedback" / "kr_written_by_a_candidate.txt"


@dataclass(frozen=True)
class Fault:
    kind: str
    code: str
    status: Status
    words: str = ""
    problem: str = "suite:level1/19"
    limit: str | None = None  # the sandbox limit this one proves (test_limits_cpp.py)


HONEST = [
    Fault("honest", relu("return ops.relu(x)\n# batch"), Status.ok),
    Fault("honest", relu("return ops.relu(x.contiguous())\n# batch"), Status.ok),
    Fault("honest", relu("y = torch.empty_like(x)\ny.copy_(ops.relu(x))\nreturn y\n# batch"), Status.ok),
    Fault("honest", candidate("return ops.mm(a, b)\n# batch", args="a, b"), Status.ok,
          problem="suite:level1/1"),
]
BAD = [
    (3, Fault("segfault", relu("return ops.crash(x)"), Status.runtime_error, "SIGSEGV")),
    (3, Fault("segfault", relu("import faulthandler\nfaulthandler._sigsegv()"), Status.runtime_error,
              "SIGSEGV")),
    (2, Fault("hang", relu("while True:\n    pass"), Status.timeout, f"timed out after {TIMEOUT_S} s",
              limit="wall_time_python")),
    (2, Fault("hang", relu("return ops.hang(x)"), Status.timeout, f"timed out after {TIMEOUT_S} s",
              limit="wall_time_native")),
    (3, Fault("memory", relu("y = torch.empty(3 << 28)\nreturn ops.relu(x)"), Status.runtime_error,
              "memory", limit="address_space")),
    (2, Fault("descriptors", relu("import os\nkeep = [os.open(os.devnull, os.O_RDONLY) for _ in "
                                  "range(5000)]\nreturn ops.relu(x)"), Status.runtime_error,
              "Too many open files", limit="open_files")),
    (1, Fault("output", relu("chunk = 'x' * (1 << 20)\nfor _ in range(300):\n    print(chunk)\n"
                             "return ops.relu(x)"), Status.runtime_error, "File too large",
              limit="output_size")),
    (3, Fault("child process", relu("return ops.relu_spawn(x)"), Status.guard_violation,
              "child process", limit="child_process")),
    (3, Fault("exit 0", relu("import os\nos._exit(0)"), Status.runtime_error, "forged or missing result")),
    (2, Fault("exit 3", relu("import os\nos._exit(3)"), Status.runtime_error, "exited with status 3")),
    (2, Fault("exception", relu("raise RuntimeError('kernel launch failed: invalid configuration')"),
              Status.runtime_error, "invalid configuration")),
    (1, Fault("write outside scratch", relu(f"open({str(MARKER)!r}, 'w').write('x')\nreturn ops.relu(x)"),
              Status.runtime_error, "Read-only file system", limit="write_outside_scratch")),
    (1, Fault("network", relu("torch.hub.download_url_to_file('http://93.184.216.34/', 'page', "
                              "progress=False)\nreturn ops.relu(x)"), Status.runtime_error,
              "unreachable", limit="network")),
    (1, Fault("honest", relu("open('notes.txt', 'w').write('scratch is writable')\nreturn ops.relu(x)"),
              Status.ok, limit="write_scratch_is_fine")),
]


def _batch() -> list[Fault]:
    bad = [f for n, f in BAD for _ in range(n)]
    honest = [HONEST[i % len(HONEST)] for i in range(50 - len(bad))]
    mixed, h, b = [], 0, 0
    while h < len(honest) or b < len(bad):  # interleave: faults spread through the batch
        if b < len(bad):
            mixed.append(bad[b])
            b += 1
        if h < len(honest):
            mixed.append(honest[h])
            h += 1
    return mixed


FAULTS = _batch()
assert len(FAULTS) == 50
