"""The compile baseline's build made ahead (feedback/worker/precompile.py), checked on a device.

    python -m experiments.bench.precompile_check [--backend cuda|cpp] [--size SIZE] [--out FILE.json]

For each problem, on a cold inductor and Triton cache of its own:
1. in this process, `precompile.build` under torch.profiler: what it launched on the device
   (kernels, copies, memsets; expected: nothing) and whether it built;
2. the `compiled` time job in a worker process of its own (`python -m feedback.worker`): its
   phases: `precompile` (before the device is asked for) and `compile` (the timed compile's
   trace, which should find the build cached), and its status.
A table is printed; every problem's record is appended to `--out` as it finishes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBLEMS = ("level1/23_softmax", "level1/28_group_norm", "level1/34_max_pool2d",
            "level1/36_cross_entropy_loss", "level2/5_gemm_batchnorm_tanh")

REPO = Path(__file__).resolve().parents[2]


def launched(job, device) -> dict:
    """precompile.build under the profiler: (built, device activities by kind)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from feedback.worker import precompile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    start = time.monotonic()
    with profile(activities=activities) as prof:
        built = precompile.build(job, device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    seconds = time.monotonic() - start
    on_device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return {"built": built, "build_s": round(seconds, 2), "device_events": len(on_device),
            "device_event_names": sorted({e.name for e in on_device})[:10]}


def job_phases(job_path: Path, env: dict) -> dict:
    from feedback.job import WorkerReport

    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "feedback.worker", str(job_path)], cwd=REPO,
                          env=env, capture_output=True, timeout=600, check=False)
    job = json.loads(job_path.read_text())
    result = Path(job["result_path"])
    if not result.exists():
        return {"status": f"no report (exit {proc.returncode})",
                "stderr": proc.stderr.decode(errors="replace")[-1500:]}
    report = WorkerReport.model_validate(json.loads(result.read_text()))
    return {"status": report.status.value, "message": report.message[:300],
            "process_s": round(time.monotonic() - start, 2),
            "phases": {k: round(v, 3) for k, v in report.phases.items()}}


def _job(problem, args: argparse.Namespace, device: str, root: Path, tag: str):
    """The `compiled` time job of `problem`, its caches and files under `root / tag`."""
    from feedback.job import WorkerJob
    from feedback.options import EvalOptions

    return WorkerJob(kind="time", role="compiled", problem=problem, backend=args.backend,
                     options=EvalOptions(device=device, size=args.size),
                     extensions_dir=str(root / tag / "ext"), scratch_dir=str(root / tag),
                     result_path=str(root / tag / "result.json"), nonce=tag)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["cuda", "cpp"], default="cuda")
    parser.add_argument("--size", default=None)
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS))
    parser.add_argument("--out", type=Path, default=Path("precompile_check.jsonl"))
    args = parser.parse_args(argv)
    from problems.loaders import SUITE_ROOT, load_file

    for name in args.problems:
        level, stem = name.split("/")
        problem = load_file(SUITE_ROOT / level / f"{stem}.py")
        with tempfile.TemporaryDirectory(prefix="kr-precompile-") as tmp:
            root = Path(tmp)
            device = "cuda:0" if args.backend == "cuda" else "cpu"

            # 1: this process, caches of its own
            (root / "here").mkdir()
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "here" / "inductor")
            os.environ["TRITON_CACHE_DIR"] = str(root / "here" / "triton")
            import torch

            row = {"problem": name,
                   **launched(_job(problem, args, device, root, "here"), torch.device(device))}
            # 2: a worker process, cold caches of its own
            (root / "job").mkdir()
            path = root / "job" / "job.json"
            path.write_text(_job(problem, args, device, root, "job").model_dump_json())
            env = {k: v for k, v in os.environ.items()
                   if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
            row["job"] = job_phases(path, env)
        with open(args.out, "a") as out:
            out.write(json.dumps(row) + "\n")
        ph = row["job"].get("phases", {})
        print(f"{name:32s} built {row['built']!s:5s} ahead {row['build_s']:6.2f}s "
              f"device events {row['device_events']:3d} | job {row['job']['status']:14s} "
              f"precompile {ph.get('precompile', 0):6.2f}s compile {ph.get('compile', 0):6.2f}s "
              f"prepare {ph.get('prepare', 0):5.2f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
