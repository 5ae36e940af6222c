"""The trusted set-up shared by correctness, timing and profiling jobs, and the guarded call.

Order matters, and is the point of this module (issue 4, classes 2, 5, 12):
1. The problem module, the reference model (and its float64 twin) and a warm-up reference call are
   made *before* the candidate is imported: CUDA and the CPU thread pool exist by then, so the
   thread baseline and the tamper snapshot are taken over a settled process. The warm-up call also
   records the operators the reference dispatches (whose kernels must stay torch's).
2. The audit hook (audit.py) starts watching the candidate's file; then the candidate is imported
   from that file and built with the reference's weights.
3. `call_candidate` poisons freed memory first, runs the candidate on its own clones, waits for
   the whole device, then checks: exceptions and launch errors, output type/stride/aliasing,
   deferred writes, leftover threads, tampering.
"""

from __future__ import annotations

import contextlib
import re
import types
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import torch

from feedback.job import WorkerJob
from feedback.policy import own_code_violation
from feedback.result import Status
from feedback.worker import audit, devices, guards, inputs, loading, phases, tamper
from feedback.worker.errors import JobFailure, candidate_error
from feedback.worker.ops import dispatched_ops, op_names
from feedback.worker.owncode import OwnCode
from feedback.worker.tolerance import Comparison, compare, every_path

KEEP_ALIVE: list[Harness] = []
"""Every harness of this process, so that the candidate's objects are never freed (and their
finalizers never run) after the job's last integrity check; see run.run_job."""


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
    dispatch: tamper.DispatchTable | None = None
    reference_ops: dict[str, int] = field(default_factory=dict)
    reference_hooks: dict[str, int] = field(default_factory=dict)
    audit: audit.AuditLog | None = None
    reference_s: float = 0.0
    """The slowest reference call so far (seconds, device work included): scales how long a
    candidate's device work may take after its forward() returned (devices.device_wait_limit)."""
    own: OwnCode | None = None
    weight_rule: str | None = None  # how the reference's weights reached the candidate (loading.py)
    notes: list[str] = field(default_factory=list)


def prepare(job: WorkerJob, *, with64: bool = False, cpu_threads: int | None = None,
            load: bool = True) -> Harness:
    """Steps 1 and 2 of the module docstring; the candidate only when `job.candidate_path`, and
    with `load` False not yet: then step 2 is `load_candidate`'s, later (a time job prepares
    with the device shared and imports the candidate only once it holds the device alone)."""
    with phases.timed("prepare"):
        return _prepare(job, with64=with64, cpu_threads=cpu_threads, load=load)


def threads_for(job: WorkerJob) -> int | None:
    """The CPU threads a time or profile job's harness sets (`prepare`'s `cpu_threads`): the
    options' on the cpp backend, torch's default (None) on a GPU."""
    return job.options.cpu_threads if job.backend == "cpp" else None


def load_candidate(h: Harness) -> None:
    """Step 2 of the module docstring, for a harness prepared without it."""
    with phases.timed("load"):
        _load_candidate(h)


def _prepare(job: WorkerJob, *, with64: bool, cpu_threads: int | None, load: bool) -> Harness:
    with phases.timed("prepare/context"):
        device = devices.job_device(job.backend, job.options.device)
        if device.type == "cpu":
            devices.keep_freed_memory()
        else:
            devices.make_context()  # timed apart from what follows; a standby worker made it ahead
    devices.set_precision()
    devices.start_thread_pools(cpu_threads)
    with phases.timed("prepare/problem"):
        problem = loading.load_problem(job.problem, job.options.size)
    try:
        with phases.timed("prepare/reference"):
            reference, init_inputs, seed = loading.build_reference(problem, device)
        with phases.timed("prepare/inputs"):
            sample_seed = inputs.secret_seed()
            sample = inputs.make_inputs(problem, device, sample_seed)
            reproducible = _same_inputs(sample, inputs.make_inputs(problem, device, sample_seed))
        with phases.timed("prepare/ops"):
            reference_ops = dispatched_ops(reference, sample)
        with phases.timed("prepare/forward"), torch.no_grad():
            out = reference(*sample)
            devices.synchronize(device)
    except JobFailure:
        raise
    except Exception as exc:
        raise JobFailure(Status.runtime_error, f"the reference program failed: {exc!r}") from exc
    harness = Harness(job, device, problem, reference, init_inputs, seed,
                      output_sizes=[t.untyped_storage().nbytes() for t in inputs.tensors(out)],
                      io_bytes=inputs.nbytes(sample) + inputs.nbytes(out), reproducible=reproducible,
                      reference_ops=reference_ops, reference_hooks=tamper.instance_hooks(reference))
    if with64:
        with phases.timed("prepare/twin"):
            harness.reference64 = _float64_twin(harness)
    if job.candidate_path:
        with phases.timed("prepare/trusted"):
            _torch_compile_ready(job.candidate_path)  # here: a time job's set-up, device shared
            harness.dispatch = tamper.DispatchTable(_trusted_ops(harness, sample))
    if job.backend == "triton":
        with contextlib.suppress(ImportError):
            import triton  # noqa: F401 - imported before the snapshot, like torch
    KEEP_ALIVE.append(harness)
    if job.candidate_path and load:
        with phases.timed("prepare/candidate"):
            _load_candidate(harness)
    return harness


TRUSTED_HEAD = 1 << 16
"""Elements of each input and output that the trusted operators' trial rescales, copies and
compares (`_trusted_ops`). Which operators those steps run does not depend on how many elements
they see (the comparison runs the same ones on each chunk of `tolerance.CHUNK`), so the trial
takes a bounded piece; at full size its comparisons alone made float64 copies of every output,
twice, in a step held with the device shared by every correctness and candidate time job
(`prepare/trusted`: 0.56 s a job on an H100, run 71)."""


def _trusted_ops(h: Harness, sample: Any) -> set[str]:
    """The operators trusted code runs on a trial: drawing inputs, the reference (and its float64
    twin) on them in full, the input and output re-reads, the stress rescalings and the comparison
    on their first `TRUSTED_HEAD` elements. Their kernels must stay torch's (tamper.py)."""
    def trial() -> None:
        args = inputs.make_inputs(h.problem, h.device)
        few = inputs.head(args, TRUSTED_HEAD)
        for name in inputs.STRESS_TRANSFORMS:
            inputs.stress(few, name)
        _same_inputs(few, inputs.clone(few))
        ref, ref64 = call_reference(h, args, want64=h.reference64 is not None)
        few_ref = inputs.head(ref, TRUSTED_HEAD)
        _same_inputs(few_ref, inputs.clone(few_ref))  # an output's re-read (guards.settling)
        every_path(few_ref, inputs.head(ref64, TRUSTED_HEAD),
                   "fp64-relative" if ref64 is not None else "kernelbench")
        guards.poison_memory(h.device, h.output_sizes[:1], 1)
    try:
        return op_names(trial)
    except Exception as exc:  # the profiler is unavailable: guard the reference's operators only
        h.notes.append(f"trusted operators not profiled ({exc!r}); only the reference's are guarded")
        return set(h.reference_ops)


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
        _short_of_memory(h, exc)
        h.notes.append(f"float64 reference unavailable ({exc!r}); kernelbench tolerance used")
        return None


def _load_candidate(h: Harness) -> None:
    h.threads = guards.ThreadCount()
    h.snapshot = tamper.Snapshot([("problem", h.problem)] + tamper.model_namespaces(h.reference, "problem"))
    h.audit = audit.install()
    h.audit.watch(h.job.candidate_path)
    try:
        module = h.candidate_module = loading.import_candidate(h.job.candidate_path)
    except JobFailure:
        check_audit(h, "while the candidate was imported")
        raise
    check_integrity(h, "after the candidate's import")
    try:
        rule: list[str] = []
        h.candidate = loading.build_candidate(module, h.reference, h.init_inputs, h.seed, h.device, rule)
        h.weight_rule = rule[0] if rule else None
    except JobFailure:
        check_audit(h, "while ModelNew() was built")
        raise
    check_integrity(h, "after ModelNew() was built")
    if h.job.options.library_ops != "allow":
        h.own = OwnCode(h.job.extensions_dir, h.job.candidate_path)
        h.own.refresh()


_CALLS_TORCH_COMPILE = re.compile(r"\.\s*compile\b|\bcompile\s*\(|\b_dynamo\b|\bimport\b[^\n]*\bcompile\b")
"""`torch.compile`, `@T.compile`, `compile(...)`, `from torch import compile`, `torch._dynamo`: not
the word in a comment ("compile the kernel"), which would cost every such candidate Dynamo's import."""


def _torch_compile_ready(candidate_path: str) -> None:
    """What torch.compile changes in a process when first called, done by trusted code before
    the guards' baselines, so that an honest candidate that calls torch.compile is not refused for
    torch's own doing: Dynamo replaces `torch.nn.Module.__init__` and `__setstate__` (tamper.py
    would report torch tampered with), and tqdm starts a monitor thread with its first progress
    bar, a disabled one too (Inductor's), that the thread guard would find still running after
    forward(). tqdm's documented switch, `monitor_interval = 0`, costs nothing; Dynamo's import
    costs about 1 s and 900 modules, so only a candidate whose source calls something `compile` or
    names `_dynamo` pays it (one that hides the name is refused as before). Inductor's pool of compile
    processes is off for candidate jobs (`job.inductor_env`)."""
    with contextlib.suppress(ImportError):
        from tqdm import std

        std.tqdm.monitor_interval = 0
    try:
        source = Path(candidate_path).read_text(errors="replace")
    except OSError:
        return  # the import below reports a missing candidate
    if _CALLS_TORCH_COMPILE.search(source):
        from torch._dynamo.mutation_guard import install_generation_tagging_init

        install_generation_tagging_init()


def check_audit(h: Harness, when: str) -> None:
    """Attempts the audit hook refused (audit.py): frames, heap, /proc, processes, ..."""
    attempts = h.audit.take() if h.audit is not None else []
    if h.audit is not None and not h.audit.active:
        attempts.append("the evaluator's audit hook was switched off")
    if attempts:
        shown = "; ".join(attempts[:5]) + (f"; and {len(attempts) - 5} more" if len(attempts) > 5 else "")
        raise guards.violation(f"harness tampering {when}: {shown} (refused)")


def check_integrity(h: Harness, when: str) -> None:
    """Audit attempts, threads, tampering, the kernels of the operators trusted code calls, and
    `forward` overrides or hooks on the reference."""
    check_audit(h, when)
    if h.threads is not None:
        h.threads.check(when)
    changes = h.snapshot.changes() if h.snapshot is not None else []
    if h.dispatch is not None:
        changes += h.dispatch.changes()
    overridden = tamper.instance_overrides(h.reference)
    if overridden:
        changes.append(f"forward of reference module(s) {overridden} replaced")
    hooked = tamper.instance_hooks(h.reference)
    if hooked != h.reference_hooks:
        changes.append(f"forward hooks of the reference changed: {hooked}")
    if changes:
        shown = "; ".join(changes[:10]) + (f"; and {len(changes) - 10} more" if len(changes) > 10 else "")
        raise guards.violation(f"harness or torch tampered with {when}: {shown}")


def fresh_inputs(h: Harness, seed: int, stress: str | None = None) -> Any:
    """Inputs for one trial (optionally rescaled for the numeric stress pass)."""
    values = inputs.make_inputs(h.problem, h.device, seed)
    return inputs.stress(values, stress) if stress else values


def call_candidate(h: Harness, args: Any, held: Any = (), label: str = "a call") -> Any:
    """One guarded candidate call on `args` (its own clones); returns the checked output.

    When the library-op policy is not `allow`, the call must run the candidate's own compiled
    code (owncode.py), or it is a guard violation naming `label`.
    """
    guards.poison_memory(h.device, h.output_sizes, 2 * h.io_bytes)
    own_calls = None
    try:
        with torch.no_grad(), devices.fresh_memory_poisoned(h.device):
            if h.own is not None:
                output, own_calls = h.own.run(lambda: h.candidate(*args))
            else:
                output = h.candidate(*args)
        devices.check_launches(h.device, device_wait_s(h))
    except BaseException as exc:
        check_audit(h, "during forward()")
        raise candidate_error(exc, "ModelNew.forward raised") from exc
    guards.check_output(output, args, held)
    guards.check_stable(output, h.device)
    check_integrity(h, "after forward()")
    if own_calls == 0:
        raise guards.violation(own_code_violation([label]))
    return output


def device_wait_s(h: Harness) -> float:
    """How long a candidate call's device work may run on after its forward() returned."""
    return max(devices.DEVICE_WAIT_S, devices.DEVICE_WAIT_FACTOR * h.reference_s)


def _short_of_memory(h: Harness, exc: BaseException) -> None:
    """Where the float64 reference failed by running out of memory in a job beside others (maybe
    for their memory), that job fails: the evaluator runs it again alone (`WorkerJob.alone`),
    where running short is the reference's own need and the job goes on without it. Falling back
    beside others would judge an honest kernel by kernelbench's stricter numbers for someone
    else's memory. Any other failure: nothing (the caller falls back)."""
    if isinstance(exc, torch.OutOfMemoryError) and not h.job.alone:
        raise JobFailure(Status.runtime_error, "the float64 reference ran out of memory beside "
                         f"other jobs: {exc!r}") from exc


def _without_float64(h: Harness, exc: BaseException) -> None:
    """The float64 reference cannot run: the rest of the job compares with kernelbench's numbers
    (a stricter test for long reductions), and says so."""
    h.notes.append(f"float64 reference failed ({exc!r}); kernelbench tolerance used")
    h.reference64 = None


def call_reference(h: Harness, args: Any, want64: bool) -> tuple[Any, Any | None]:
    """The reference output, and the float64 reference's when asked and available."""
    start = perf_counter()
    with torch.no_grad():
        ref = h.reference(*args)
        ref64 = _reference64(h, args) if want64 else None
    devices.synchronize(h.device)
    h.reference_s = max(h.reference_s, perf_counter() - start)
    return ref, ref64


def judge_call(h: Harness, got: Any, args: Any, policy: str) -> Comparison:
    """The verdict without figures (all that the time job's probes and spot checks read) on `got`,
    one call's output on `args`. The reference runs in the problem's dtype first; an output equal
    to it bit for bit, every tensor of it, passes under every policy (under fp64-relative
    |got - ref64| is then the reference's own error E, within FACTOR * E), so the float64
    reference and the comparison are not run for it: outputs of an integer dtype that pass, and
    floating-point ones computed as torch computes them (ReLU, max, a scaling). Any other output
    is compared as `call_reference` and `compare` would."""
    start = perf_counter()
    with torch.no_grad():
        ref = h.reference(*args)
        same = identical(got, ref)
        ref64 = _reference64(h, args) if not same and policy == "fp64-relative" else None
    devices.synchronize(h.device)
    h.reference_s = max(h.reference_s, perf_counter() - start)
    return Comparison() if same else compare(got, ref, ref64, policy, figures=False)


def identical(got: Any, ref: Any) -> bool:
    """`got` has `ref`'s structure and each of its tensors is a plain torch.Tensor of the same
    shape, dtype and device as the reference's, equal bit for bit (guards._bitwise_equal, whose
    operators the trusted operators' trial runs). A plain value (not a tensor) is never
    `identical`: `compare` judges it."""
    if isinstance(ref, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(ref)
                and all(identical(g, r) for g, r in zip(got, ref)))
    return (isinstance(ref, torch.Tensor) and type(got) is torch.Tensor and got.shape == ref.shape
            and got.dtype == ref.dtype and got.device == ref.device and _same_bits(got, ref))


def _same_bits(got: torch.Tensor, ref: torch.Tensor) -> bool:
    """Bit for bit; for contiguous tensors the first `TRUSTED_HEAD` elements first, so an output
    that differs (most do, somewhere near the start) costs a bounded read, not a pass over both."""
    headed = got.numel() > TRUSTED_HEAD and got.is_contiguous() and ref.is_contiguous()
    if headed and not guards._bitwise_equal(inputs.head(got, TRUSTED_HEAD), inputs.head(ref, TRUSTED_HEAD)):
        return False
    return guards._bitwise_equal(got, ref)


def _reference64(h: Harness, args: Any) -> Any | None:
    """The float64 reference's output on float64 copies of `args`, None where it is unavailable."""
    if h.reference64 is None:
        return None
    try:
        return h.reference64(*inputs.to_double(args))
    except Exception as exc:  # noqa: BLE001 - the problem's code may not run in float64
        _short_of_memory(h, exc)
        _without_float64(h, exc)
        return None
