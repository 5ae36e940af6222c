"""Load the reference and the candidate, each in its own module, and give them the same weights.

Weight rule (documented for the model and for people):
1. `get_init_inputs()` is called once under a secret seed; `Model` and `ModelNew` are both built
   from those values, each right after re-seeding with that seed.
2. If `ModelNew.state_dict()` has exactly the reference's keys, the reference state is loaded by
   key.
3. Otherwise parameters are matched by order (`parameters()` of each, in registration order), and
   buffers likewise; the counts must agree.
4. Each matched pair must have the same number of elements; when the shapes differ (a bias kept
   as `[C]` where the reference has `[C, 1, 1]`, a weight flattened to `[C_out, C_in*k*k]`) the
   values are copied by reshaping, in row-major order: the same values in the same order as the
   reference's. A transposed layout is not a reshape; keep the reference's and transpose in code.
5. Anything else is a `runtime_error` that lists both sides and states this rule, so the model
   can fix its layout. The rule used (and every reshaped pair) is recorded in the result's
   `Correctness.checks.weights`.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from pathlib import Path
from typing import Any

import torch

from feedback.result import Status
from feedback.worker.errors import JobFailure, candidate_error, format_exception
from feedback.worker.inputs import secret_seed, seed_everything
from problems.module import load_module
from problems.record import Problem

_counter = itertools.count()


def load_problem(problem: Problem, size: str | None) -> types.ModuleType:
    """The problem's module at `size`; a problem that fails to load is the harness's error."""
    try:
        return load_module(problem, size)
    except Exception as exc:
        raise JobFailure(Status.runtime_error, format_exception(exc, "the problem did not load:")) from exc


def import_candidate(path: str | Path) -> types.ModuleType:
    """Execute the candidate's own file as a fresh module with a unique name.

    Raises:
        JobFailure: compile_error, with the exception text (torch puts the compiler's output in
            "Error building extension" messages) and the traceback; or when `ModelNew` is missing.
    """
    name = f"_kr_candidate_{next(_counter)}_{secret_seed():x}"
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise JobFailure(Status.compile_error, f"cannot import the candidate from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        failure = candidate_error(exc, "importing the candidate failed")
        raise JobFailure(Status.compile_error, failure.message) from exc
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise JobFailure(Status.compile_error, "the candidate defines no class `ModelNew`")
    return module


def build_reference(problem_module: types.ModuleType, device: torch.device,
                    seed: int | None = None) -> tuple[torch.nn.Module, list[Any], int]:
    """`Model(*get_init_inputs())` on `device` in eval mode; returns (model, init inputs, seed)."""
    seed = secret_seed() if seed is None else seed
    seed_everything(seed)
    init_inputs = list(problem_module.get_init_inputs())
    seed_everything(seed)
    model = problem_module.Model(*init_inputs).to(device).eval()
    return model, init_inputs, seed


def build_candidate(candidate_module: types.ModuleType, reference: torch.nn.Module,
                    init_inputs: list[Any], seed: int, device: torch.device,
                    rule: list[str] | None = None) -> torch.nn.Module:
    """`ModelNew(*init_inputs)` with the reference's weights copied in (rule in the docstring);
    the rule used is appended to `rule` when given."""
    seed_everything(seed)
    try:
        model = candidate_module.ModelNew(*init_inputs)
        model = model.to(device).eval()
    except BaseException as exc:
        raise candidate_error(exc, "constructing ModelNew failed") from exc
    if not isinstance(model, torch.nn.Module):
        raise JobFailure(Status.runtime_error, "ModelNew(...) is not a torch.nn.Module")
    used = copy_weights(reference, model)
    if rule is not None:
        rule.append(used)
    return model


RULE = ("Rule: the same state_dict keys, or else the same number of parameters and of buffers, "
        "matched in registration order, each pair with the same number of elements (copied by "
        "reshaping in row-major order when the shapes differ).")


def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> str:
    """Give `target` the values of `source`'s parameters and buffers (rule in the docstring);
    returns the rule used, naming every pair copied by reshaping."""
    src_state, dst_state = source.state_dict(), target.state_dict()
    with torch.no_grad():
        if src_state.keys() == dst_state.keys():
            used, pairs = "by state_dict key", [(k, src_state[k], dst_state[k]) for k in src_state]
        else:
            used = "by registration order"
            pairs = _pairs_by_order("parameter", list(source.named_parameters()),
                                    list(target.named_parameters()))
            pairs += _pairs_by_order("buffer", list(source.named_buffers()), list(target.named_buffers()))
        reshaped = []
        for key, src, dst in pairs:
            if src.numel() != dst.numel():
                raise JobFailure(Status.runtime_error, (
                    f"cannot copy the reference's weights ({used}): {key} has shape "
                    f"{list(src.shape)} ({src.numel()} elements) in Model but {list(dst.shape)} "
                    f"({dst.numel()} elements) in ModelNew. {RULE}"))
            if src.shape != dst.shape:
                reshaped.append(f"{key}: {list(src.shape)} -> {list(dst.shape)}")
            dst.copy_(src.reshape(dst.shape))
    if not pairs:
        return "no parameters or buffers"
    return used + (f", reshaped: {'; '.join(reshaped)}" if reshaped else ", same shapes")


def _pairs_by_order(kind: str, src: list[tuple[str, torch.Tensor]],
                    dst: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    if len(src) != len(dst):
        raise JobFailure(Status.runtime_error, (
            f"cannot copy the reference's weights: Model has {len(src)} {kind}s "
            f"{_describe(src)} but ModelNew has {len(dst)} {_describe(dst)}. {RULE}"))
    return [(f"{kind} {i} ({a} -> {b})", s, d) for i, ((a, s), (b, d)) in enumerate(zip(src, dst))]


def _describe(named: list[tuple[str, torch.Tensor]]) -> str:
    shown = ", ".join(f"{n}{list(t.shape)}" for n, t in named[:8])
    return f"[{shown}{', ...' if len(named) > 8 else ''}]"
