"""The trusted set-up shared by correctness, timing and profiling jobs, and the guarded call.

Order matters, and is the point of this module (issue 4, classes 2, 5, 12):
1. The problem module, the reference model (and its float64 twin) and a warm-up reference call are
   made *before* the candidate is imported: CUDA and the CPU thread pool exist by then, so the
   thread baseline and the tamper snapshot are taken over a settled process.
2. The candidate is imported from its own file and built with the reference's weights.
3. `call_candidate` poisons freed memory first, runs the candidate on its own clones, waits for
   the whole device, then checks: exceptions and launch errors, output type/stride/aliasing,
   deferred writes, leftover threads, tampering.
"""

from __future__ import annotations

import contextlib
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from feedback.job import WorkerJob
from feedback.result import Status
from feedback.worker import devices, guards, inputs, loading, tamper
from feedback.worker.errors import JobFailure, candidate_error


@dataclass
class Harness:
    """Everything trusted code built for one job, plus the candidate once imported."""

    job: WorkerJob
    device: torch.device
    problem: types.ModuleType
    reference: torch.nn.Module
    init_inputs: list[Any]
    seed: int
    output_sizes: list[int]
    io_bytes: int
    reproducible: bool
    reference64: torch.nn.Module | None = None
    candidate: torch.nn.Module | None = None
    candidate_module: types.ModuleType | None = None
    threads: guards.ThreadCount | None = None
    snapshot: tamper.Snapshot | None = None
    notes: list[str] = field(default_factory=list)


def prepare(job: WorkerJob, *, with64: bool = False, cpu_threads: int | None = None) -> Harness:
    """Steps 1 and 2 of the module docstring; the candidate only when `job.candidate_path`."""
    device = devices.job_device(job.backend, job.options.device)
    devices.set_precision()
    devices.start_thread_pools(cpu_threads)
    problem = loading.load_problem(job.problem, job.options.size)
    try:
        reference, init_inputs, seed = loading.build_reference(problem, device)
        sample_seed = inputs.secret_seed()
        sample = inputs.make_inputs(problem, device, sample_seed)
        reproducible = _same_inputs(sample, inputs.make_inputs(problem, device, sample_seed))
        with torch.no_grad():
            out = reference(*sample)
        devices.synchronize(device)
    except JobFailure:
        raise
    except Exception as exc:
        raise JobFailure(Status.runtime_error, f"the reference program failed: {exc!r}") from exc
    harness = Harness(job, device, problem, reference, init_inputs, seed,
                      output_sizes=[t.untyped_storage().nbytes() for t in inputs.tensors(out)],
                      io_bytes=inputs.nbytes(sample) + inputs.nbytes(out), reproducible=reproducible)
    if with64:
        harness.reference64 = _float64_twin(harness)
    if job.backend == "triton":
        with contextlib.suppress(ImportError):
            import triton  # noqa: F401 - imported before the snapshot, like torch
    if job.candidate_path:
        _load_candidate(harness)
    return harness


def _same_inputs(a: Any, b: Any) -> bool:
    ta, tb = inputs.tensors(a), inputs.tensors(b)
    return len(ta) == len(tb) and all(
        x.shape == y.shape and x.dtype == y.dtype and guards._bitwise_equal(x, y) for x, y in zip(ta, tb))


def _float64_twin(h: Harness) -> torch.nn.Module | None:
    """The reference rebuilt with the same seed, its weights copied, and cast to float64."""
    try:
        twin, _, _ = loading.build_reference(h.problem, h.device, h.seed)
        loading.copy_weights(h.reference, twin)
        return twin.double()
    except Exception as exc:  # the problem's own code may not support float64
        h.notes.append(f"float64 reference unavailable ({exc!r}); kernelbench tolerance used")
        return None


def _load_candidate(h: Harness) -> None:
    h.threads = guards.ThreadCount()
    h.snapshot = tamper.Snapshot([("problem", h.problem)] + tamper.model_namespaces(h.reference, "problem"))
    module = h.candidate_module = loading.import_candidate(h.job.candidate_path)
    check_integrity(h, "after the candidate's import")
    h.candidate = loading.build_candidate(module, h.reference, h.init_inputs, h.seed, h.device)
    check_integrity(h, "after ModelNew() was built")


def check_integrity(h: Harness, when: str) -> None:
    """Threads, tampering and instance-level `forward` overrides on the reference."""
    if h.threads is not None:
        h.threads.check(when)
    changes = h.snapshot.changes() if h.snapshot is not None else []
    overridden = tamper.instance_overrides(h.reference)
    if overridden:
        changes.append(f"forward of reference module(s) {overridden} replaced")
    if changes:
        shown = "; ".join(changes[:10]) + (f"; and {len(changes) - 10} more" if len(changes) > 10 else "")
        raise guards.violation(f"harness or torch tampered with {when}: {shown}")


def fresh_inputs(h: Harness, seed: int, stress: str | None = None) -> Any:
    """Inputs for one trial (optionally rescaled for the numeric stress pass)."""
    values = inputs.make_inputs(h.problem, h.device, seed)
    return inputs.stress(values, stress) if stress else values


def call_candidate(h: Harness, args: Any, held: Any = ()) -> Any:
    """One guarded candidate call on `args` (its own clones); returns the checked output."""
    guards.poison_memory(h.device, h.output_sizes, 2 * h.io_bytes)
    try:
        with torch.no_grad():
            output = h.candidate(*args)
        devices.synchronize(h.device)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and CUDA errors included
        raise candidate_error(exc, "ModelNew.forward raised") from exc
    guards.check_output(output, args, held)
    guards.check_stable(output, h.device)
    check_integrity(h, "after forward()")
    return output


def call_reference(h: Harness, args: Any, want64: bool) -> tuple[Any, Any | None]:
    """The reference output, and the float64 reference's when asked and available."""
    with torch.no_grad():
        ref = h.reference(*args)
        ref64 = None
        if want64 and h.reference64 is not None:
            try:
                ref64 = h.reference64(*inputs.to_double(args))
            except Exception as exc:
                h.notes.append(f"float64 reference failed ({exc!r}); kernelbench tolerance used")
                h.reference64 = None
    devices.synchronize(h.device)
    return ref, ref64
