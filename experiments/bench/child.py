"""One benchmark measurement in a fresh process: build a candidate, and optionally evaluate it the
stock way (one process per candidate, no cache), as KernelBench's own flow does.

The parent side (`run_build_child`, `run_stock_eval_child`) starts the child through
feedback.sandbox (the project's one process launcher) and reads its JSON result file.
The child side is `python -m experiments.bench.child SPEC.json`.

Stock evaluation = import the candidate (plain `load_inline`), then `correct_trials` comparisons
with the reference on fresh inputs (KernelBench's tolerance, atol = rtol = 1e-2), then
`timing_trials` timed calls of the candidate (CUDA events on a GPU, perf_counter on the CPU).
It is the baseline of experiments/bench/throughput.py, not an evaluator to trust.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_build_child(candidate: Path, ext_dir: Path, fast: dict | None,
                    arch: str | None, timeout_s: float = 1800) -> dict:
    """Import `candidate` in a fresh process with TORCH_EXTENSIONS_DIR=`ext_dir`.

    `fast` = feedback.fastbuild.FastBuild fields for the accelerated arm, None for stock.
    Returns {ok, wall_s (the import), cpu_s (the process and its compilers), error, decision}.
    """
    return _run({"mode": "build", "candidate": str(Path(candidate).resolve()), "ext": str(ext_dir),
                 "fast": fast, "arch": arch}, timeout_s)


def run_stock_eval_child(candidate: Path, problem_path: Path, *, ext_dir: Path, size: str | None,
                         device: str, correct_trials: int, timing_trials: int, arch: str | None,
                         timeout_s: float = 1800) -> dict:
    """Import (stock `load_inline`, building into `ext_dir` unless already built there) and
    evaluate one candidate in one fresh process."""
    return _run({"mode": "evaluate", "candidate": str(Path(candidate).resolve()),
                 "ext": str(ext_dir), "fast": None, "arch": arch,
                 "problem": str(Path(problem_path).resolve()), "size": size, "device": device,
                 "correct_trials": correct_trials, "timing_trials": timing_trials}, timeout_s)


def run_do_bench_child(candidate: Path, problem: dict, *, ext_dir: Path, size: str | None,
                       device: str, cache_dir: Path, device_lock: Path | None = None,
                       timeout_s: float = 600) -> dict:
    """`triton.testing.do_bench` of a candidate the evaluator built (its own build folder and
    fastbuild settings, so nothing is rebuilt), after a KernelBench-style correctness check:
    the independent clock that experiments/bench/timing_stability.py compares the evaluator's
    medians with. `problem` is a `Problem` record as a dict (it may carry a size of the bench).
    `device_lock`: held by the child from its first device work on, so its process start, torch
    and the candidate's import never hold the device (feedback/evaluate.py, `device_lock`)."""
    return _run({"mode": "evaluate", "candidate": str(Path(candidate).resolve()),
                 "ext": str(ext_dir), "fast": {"cache_dir": str(cache_dir)}, "arch": None,
                 "problem_record": problem, "size": size, "device": device, "correct_trials": 2,
                 "timing_trials": 0, "do_bench": True,
                 "device_lock": str(device_lock) if device_lock else None}, timeout_s)


def run_kernelbench_eager_child(problem: dict, *, size: str | None, device: str,
                                trials: int = 100, device_lock: Path | None = None,
                                timeout_s: float = 300) -> dict:
    """The eager reference timed KernelBench's way, in a fresh process: `kernelbench_ms` (the
    mean of `trials` calls after 3 warm-ups; per call: synchronize, L2 flush (256 MB written),
    start event, the call, end event, synchronize, as its public harness does now) and
    `kernelbench_noflush_ms` (the same without the flush, as in the paper); medians beside them:
    the outside clock that the evaluator's eager median is checked against (experiments/bench/
    stability_run.py). On a CPU machine the host clock, for the code path only. `device_lock`
    as for `run_do_bench_child`."""
    return _run({"mode": "kernelbench_eager", "problem_record": problem, "size": size,
                 "device": device, "timing_trials": trials,
                 "device_lock": str(device_lock) if device_lock else None}, timeout_s)


@contextlib.contextmanager
def _device(spec: dict, out: dict) -> Iterator[None]:
    """The device lock of `spec` held for the block (none asked: nothing held); how long it
    waited for it into `out["device_wait_s"]`."""
    if not spec.get("device_lock"):
        yield
        return
    from feedback.cache import locked

    start = time.perf_counter()
    with locked(Path(spec["device_lock"])):
        out["device_wait_s"] = round(time.perf_counter() - start, 3)
        yield


def _run(spec: dict, timeout_s: float) -> dict:
    from feedback.sandbox import run_child

    with tempfile.TemporaryDirectory(prefix="kr-bench-child-") as tmp:
        spec = dict(spec, result=str(Path(tmp) / "result.json"))
        (Path(tmp) / "spec.json").write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if k != "TORCH_EXTENSIONS_DIR"}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        start = time.monotonic()
        outcome = run_child([sys.executable, "-m", "experiments.bench.child", str(Path(tmp) / "spec.json")],
                            cwd=Path(tmp), env=env, timeout_s=timeout_s, isolate=False,
                            max_output_bytes=None)  # a PCH is ~800 MB
        try:
            result = json.loads(Path(spec["result"]).read_text())
        except (OSError, ValueError):
            result = {"ok": False, "wall_s": None, "cpu_s": None,
                      "error": f"child {outcome.describe(timeout_s)}: {outcome.stderr_tail[-2000:]}"}
        result["process_s"] = round(time.monotonic() - start, 3)
        return result


def _cpu_s() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _child(spec: dict) -> dict:
    if spec["mode"] == "kernelbench_eager":
        return _kernelbench_eager(spec)
    os.environ["TORCH_EXTENSIONS_DIR"] = spec["ext"]
    if spec.get("arch") and spec["fast"] is None:
        os.environ["TORCH_CUDA_ARCH_LIST"] = spec["arch"]
    import importlib.util

    import torch  # noqa: F401 - imported before the clock starts, as in the evaluator's child

    if spec["fast"] is not None:
        from feedback import fastbuild

        fastbuild.install(**spec["fast"])
    result: dict = {"ok": False, "error": None}
    cpu0, t0 = _cpu_s(), time.perf_counter()
    try:
        loader = importlib.util.spec_from_file_location("_kr_bench_candidate", spec["candidate"])
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        result["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - a failed build is a measurement too
        result["error"] = f"{type(exc).__name__}: {str(exc)[-4000:]}"
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    result["cpu_s"] = round(_cpu_s() - cpu0, 3)
    result["decision"] = _decisions(Path(spec["ext"]))
    if result["ok"] and spec["mode"] == "evaluate":
        result.update(_evaluate(module, spec))
    return result


def _decisions(ext: Path) -> list[dict]:
    """What fastbuild decided for each build directory (its PCH: kr_fastbuild.json; its CUDA
    sources light or stock: fastbuild_light's record), if anything."""
    from feedback.fastbuild_light import RECORD, chose

    found = []
    for build in sorted({p.parent for p in (*ext.glob("*/kr_fastbuild.json"), *ext.glob(f"*/{RECORD}"))}):
        entry: dict = {"dir": build.name}
        with contextlib.suppress(OSError, ValueError):
            entry.update(json.loads((build / "kr_fastbuild.json").read_text()))
        if (light := chose(build)) is not None:
            entry["light"] = light
        if len(entry) > 1:  # an unreadable record says nothing
            found.append(entry)
    return found


def _evaluate(module, spec: dict) -> dict:
    """KernelBench-style correctness and timing of an imported candidate (see module docstring)."""
    from problems.loaders import load_file
    from problems.module import load_module

    out: dict = {"correct": False, "eval_error": None}
    t0 = time.perf_counter()
    try:
        from problems.record import Problem

        record = Problem.model_validate(spec["problem_record"]) if "problem_record" in spec \
            else load_file(Path(spec["problem"]))
        problem = load_module(record, spec.get("size"))
        if spec.get("do_bench"):
            import triton.testing  # noqa: F401 - imported before the device is asked for
        with _device(spec, out):
            _check_and_time(module, problem, spec, out, t0)
    except BaseException as exc:  # noqa: BLE001
        out["eval_error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    return out


def _check_and_time(module, problem, spec: dict, out: dict, t0: float) -> None:
    """The device part of `_evaluate`, its figures into `out`."""
    import torch

    device = torch.device(spec["device"])
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    ref = problem.Model(*init).to(device).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*init).to(device).eval()
    with torch.no_grad():
        for trial in range(spec["correct_trials"]):
            torch.manual_seed(1000 + trial)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x
                      for x in problem.get_inputs()]
            expected, got = ref(*inputs), new(*inputs)
            if got.shape != expected.shape or not torch.allclose(got, expected, 1e-2, 1e-2):
                raise AssertionError(f"mismatch on trial {trial}")
        out["correct"] = True
        out["correct_s"] = round(time.perf_counter() - t0, 3)
        t1 = time.perf_counter()
        if spec.get("do_bench"):
            from triton.testing import do_bench

            out["do_bench_ms"] = do_bench(lambda: new(*inputs), return_mode="median")
        else:
            out["runtime_ms"] = _time_calls(new, inputs, spec["timing_trials"], device)
        out["timing_s"] = round(time.perf_counter() - t1, 3)


def _kernelbench_eager(spec: dict) -> dict:
    """See `run_kernelbench_eager_child`."""
    import torch  # noqa: F401 - imported before the device is asked for

    from problems.module import load_module
    from problems.record import Problem

    out: dict = {"ok": False, "error": None}
    try:
        problem = load_module(Problem.model_validate(spec["problem_record"]), spec.get("size"))
        with _device(spec, out):
            _time_eager(problem, spec, out)
        out["ok"] = True
    except BaseException as exc:  # noqa: BLE001 - a failed measurement is reported, not raised
        out["error"] = f"{type(exc).__name__}: {str(exc)[-2000:]}"
    return out


def _time_eager(problem, spec: dict, out: dict) -> None:
    """The device part of `_kernelbench_eager`, its figures into `out`."""
    import statistics

    import torch

    device = torch.device(spec["device"])
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).to(device).eval()
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    scratch = torch.empty(256 << 20, dtype=torch.uint8, device=device) \
        if device.type == "cuda" else None  # larger than any GPU's L2
    with torch.no_grad():
        for flush, key in ((scratch, "kernelbench_ms"), (None, "kernelbench_noflush_ms")):
            times = _call_times(model, inputs, spec["timing_trials"], device, flush)
            out[key] = statistics.fmean(times)
            out[key.replace("_ms", "_median_ms")] = statistics.median(times)


def _time_calls(model, inputs: list, trials: int, device) -> float:
    """Median milliseconds of `trials` calls after 3 warm-ups."""
    import statistics

    return statistics.median(_call_times(model, inputs, trials, device))


def _call_times(model, inputs: list, trials: int, device, flush=None) -> list[float]:
    """Milliseconds of each of `trials` calls after 3 warm-ups: one CUDA-event pair and a
    synchronize per call on a GPU (with `flush`, a tensor larger than the L2: synchronize, then
    write it, before each start event, as KernelBench's harness does now), the host clock on a
    CPU."""
    import torch

    for _ in range(3):
        model(*inputs)
    times = []
    for _ in range(trials):
        if device.type == "cuda":
            if flush is not None:
                torch.cuda.synchronize()
                flush.fill_(42)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t = time.perf_counter()
            model(*inputs)
            times.append((time.perf_counter() - t) * 1e3)
    return times


if __name__ == "__main__":
    job = json.loads(Path(sys.argv[1]).read_text())
    Path(job["result"]).write_text(json.dumps(_child(job)))
