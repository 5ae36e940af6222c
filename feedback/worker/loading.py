"""Load the reference and the candidate, each in its own module, and give them the same weights.

Weight rule (documented for the model and for people):
1. `get_init_inputs()` is called once under a secret seed; `Model` and `ModelNew` are both built
   from those values, each right after re-seeding with that seed.
2. If `ModelNew.state_dict()` has exactly the reference's keys, the reference state is loaded by
   key (shapes must agree key by key).
3. Otherwise parameters are matched by order (`parameters()` of each, in registration order), and
   buffers likewise, and every pair must have the same shape; counts must agree.
4. Anything else is a `runtime_error` that lists both sides, so the model can fix its layout.
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
                    init_inputs: list[Any], seed: int, device: torch.device) -> torch.nn.Module:
    """`ModelNew(*init_inputs)` with the reference's weights copied in (rule in the docstring)."""
    seed_everything(seed)
    try:
        model = candidate_module.ModelNew(*init_inputs)
        model = model.to(device).eval()
    except BaseException as exc:
        raise candidate_error(exc, "constructing ModelNew failed") from exc
    if not isinstance(model, torch.nn.Module):
        raise JobFailure(Status.runtime_error, "ModelNew(...) is not a torch.nn.Module")
    copy_weights(reference, model)
    return model


def copy_weights(source: torch.nn.Module, target: torch.nn.Module) -> None:
    """Give `target` the values of `source`'s parameters and buffers (by key, else by order)."""
    src_state, dst_state = source.state_dict(), target.state_dict()
    with torch.no_grad():
        if src_state.keys() == dst_state.keys():
            pairs = [(k, src_state[k], dst_state[k]) for k in src_state]
        else:
            pairs = _pairs_by_order("parameter", list(source.named_parameters()),
                                    list(target.named_parameters()))
            pairs += _pairs_by_order("buffer", list(source.named_buffers()), list(target.named_buffers()))
        for key, src, dst in pairs:
            if src.shape != dst.shape:
                raise JobFailure(Status.runtime_error, f"cannot copy the reference's weights: {key} has "
                                 f"shape {list(src.shape)} in Model but {list(dst.shape)} in ModelNew")
            dst.copy_(src)


def _pairs_by_order(kind: str, src: list[tuple[str, torch.Tensor]],
                    dst: list[tuple[str, torch.Tensor]]) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    if len(src) != len(dst):
        raise JobFailure(Status.runtime_error, (
            f"cannot copy the reference's weights: Model has {len(src)} {kind}s "
            f"{_describe(src)} but ModelNew has {len(dst)} {_describe(dst)}. Rule: same state_dict "
            "keys, or else the same parameters and buffers in the same order with the same shapes."))
    return [(f"{kind} {i} ({a} -> {b})", s, d) for i, ((a, s), (b, d)) in enumerate(zip(src, dst))]


def _describe(named: list[tuple[str, torch.Tensor]]) -> str:
    shown = ", ".join(f"{n}{list(t.shape)}" for n, t in named[:8])
    return f"[{shown}{', ...' if len(named) > 8 else ''}]"
