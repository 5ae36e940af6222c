"""The contract between the evaluator (parent) and its worker children.

The parent writes a `WorkerJob` as JSON, starts `python -m feedback.worker JOB.json` in a sandboxed
child, and reads back a `WorkerReport` from `job.result_path` (never from stdout). The report must
echo the job's nonce, or the parent treats it as forged.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from feedback.options import Backend, EvalOptions
from feedback.result import Correctness, Environment, Profile, Status, TimingStats
from problems.record import Problem


class WorkerJob(BaseModel):
    """One unit of child-side work."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["build", "correct", "time", "profile"] = Field(
        description="`build` imports the candidate (compiling it into extensions_dir); `correct` "
        "checks it; `time` / `profile` measure `role`.")
    role: Literal["candidate", "eager", "compiled"] = Field(
        default="candidate", description="Which program `time`/`profile` measure.")
    problem: Problem
    backend: Backend
    options: EvalOptions
    candidate_path: str | None = Field(default=None, description="The candidate's own file.")
    extensions_dir: str = Field(description="TORCH_EXTENSIONS_DIR / TRITON_CACHE_DIR root of the build.")
    scratch_dir: str = Field(description="The only writable directory of the child.")
    result_path: str = Field(description="Where the child writes its WorkerReport JSON.")
    nonce: str = Field(description="Random token the report must echo.")


class WorkerReport(BaseModel):
    """What a child found. `status` ok = this unit of work passed."""

    nonce: str
    status: Status
    message: str = ""
    correctness: Correctness | None = None
    timing: TimingStats | None = None
    noise: float | None = None
    profile: Profile | None = None
    flops: float | None = None
    min_bytes: float | None = None
    warnings: list[str] = Field(default_factory=list)
    environment: Environment | None = None
    seconds: float = 0.0
