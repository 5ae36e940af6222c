"""Cold and cache-hit compile time of typical candidates: stock `load_inline` vs feedback.fastbuild.

    python -m experiments.bench.compile_bench --backend cpp [--repeats 1] [--out FILE.json]
    python -m experiments.bench.compile_bench --backend cuda --arch 9.0   # on the GPU machine

Each build runs in a fresh process (as the evaluator's build child does) with a fresh
TORCH_EXTENSIONS_DIR (cold), then once more in another fresh process over the same directory
(cache hit: unchanged source). Stock and accelerated builds alternate, candidate by candidate, so
both arms see the same machine load; wall and CPU seconds (compiler processes included) are
recorded, since CPU seconds hardly move when other work shares the machine. Before the timed
builds, one accelerated build per candidate creates its precompiled header (a one-off per flag
set, reported as `pch_setup`).

The JSON is written after every build (`complete` false until the last), so a run cut by a
time limit keeps the builds that finished.

Stock = torch as installed, in this environment (if ccache is on PATH, torch uses it: the JSON
says so). Where no GPU is visible, CUDA builds of both arms need `--arch` (torch cannot detect one).

`--versus serial-nvcc` compares fastbuild with fastbuild whose nvcc runs its steps one after
another (`FastBuild.parallel_nvcc` off) instead of stock. `--concurrency N` runs N builds at
once (the arms alternate in the queue, so both meet the same load), as the evaluator's build
pool does; the PCHs are then made before the timed builds by `fastbuild.prepare`, as the
evaluator's parent does, instead of by one set-up build per candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.bench.child import run_build_child
from feedback import fastbuild

CANDIDATES = Path(__file__).parent / "candidates"


VERSUS = {"stock": "stock", "serial-nvcc": "fastbuild, nvcc serial"}
"""What the first arm is (`--versus`), as the table names it."""


def measure(backend: str, candidates: list[Path], *, repeats: int, cache_dir: Path,
            arch: str | None, ccache: str, jobs: int | None, stock_arch: str | None,
            versus: str = "stock", concurrency: int = 1,
            progress: Callable[[dict, str], None] | None = None) -> dict:
    """Every build of the benchmark, as plain data (see the module docstring); `progress` gets
    the record so far (`complete` false) and a line after each build, so a run cut by a time
    limit keeps every build that finished."""
    fast = {"cache_dir": str(cache_dir), "arch": arch, "ccache": ccache, "jobs": jobs}
    first = None if versus == "stock" else {**fast, "parallel_nvcc": False}
    record: dict = {"backend": backend, "machine": _machine(), "settings": fast,
                    "stock_arch": stock_arch, "versus": versus, "concurrency": concurrency,
                    "complete": False, "pch_setup": [], "runs": [], "summary": summarize([])}
    lock = threading.Lock()

    def done(line: str) -> None:
        with lock:
            record["summary"] = summarize(record["runs"])
            if progress is not None:
                progress(record, line)

    def timed(work: Path, r: int, i: int, arm: str) -> None:
        candidate = candidates[i]
        settings = first if arm == "stock" else fast
        ext = work / f"{arm}-{r}-{i}"
        cold = run_build_child(candidate, ext, settings, stock_arch)
        hit = run_build_child(candidate, ext, settings, stock_arch)
        with lock:
            record["runs"].append({"candidate": candidate.name, "arm": arm, "repeat": r,
                                   "cold": cold, "hit": hit})
        done(f"{arm} {candidate.name}: cold {_took(cold)}, unchanged {_took(hit)}")
    with tempfile.TemporaryDirectory(prefix="kr-bench-") as tmp:
        work = Path(tmp)
        if concurrency > 1:
            start = time.monotonic()
            with fastbuild.accelerated(cache_dir, arch=arch, ccache=ccache, jobs=jobs):
                for c in candidates:
                    fastbuild.prepare(c.read_text(), backend, cache_dir)
            record["pch_setup"].append({"ok": True, "wall_s": round(time.monotonic() - start, 2),
                                        "candidate": "fastbuild.prepare of every candidate"})
            done(f"setup: {record['pch_setup'][-1]['wall_s']} s")
        else:
            for i, c in enumerate(candidates):
                record["pch_setup"].append(dict(run_build_child(c, work / f"setup{i}", fast,
                                                                stock_arch), candidate=c.name))
                done(f"setup {c.name}: {_took(record['pch_setup'][-1])}")
        queue = [(r, i, arm) for r in range(repeats) for i in range(len(candidates))
                 for arm in (("stock", "fast") if (r + i) % 2 == 0 else ("fast", "stock"))]
        if concurrency <= 1:
            for item in queue:
                timed(work, *item)
        else:
            pool = ThreadPoolExecutor(concurrency)
            try:
                for future in [pool.submit(timed, work, *item) for item in queue]:
                    future.result()
            finally:  # a failure or an interrupt: no new build starts
                pool.shutdown(wait=True, cancel_futures=True)
    record["complete"] = True
    return record


def _took(build: dict) -> str:
    return (f"{build['wall_s']:.1f} s wall, {build['cpu_s']:.1f} CPU s" if build.get("ok")
            else "failed")


def summarize(runs: list[dict]) -> dict[str, dict[str, float | int | None]]:
    """Per arm: medians of cold wall / CPU seconds and of cache-hit wall seconds."""
    out: dict[str, dict[str, float | int | None]] = {}
    for arm in ("stock", "fast"):
        mine = [r for r in runs if r["arm"] == arm]
        ok = [r for r in mine if r["cold"]["ok"] and r["hit"]["ok"]]

        def med(stage: str, field: str, rows: list[dict] = ok) -> float | None:
            values = [r[stage][field] for r in rows if r[stage][field] is not None]
            return round(statistics.median(values), 2) if values else None

        out[arm] = {"builds": len(mine), "failed": len(mine) - len(ok),
                    "cold_wall_s": med("cold", "wall_s"), "cold_cpu_s": med("cold", "cpu_s"),
                    "hit_wall_s": med("hit", "wall_s"), "hit_cpu_s": med("hit", "cpu_s")}
    return out


def markdown(result: dict) -> str:
    """The short table docs/benchmarks.md quotes."""
    s, f = result["summary"]["stock"], result["summary"]["fast"]
    first = VERSUS[result.get("versus", "stock")]

    def cell(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    def ratio(a: float | None, b: float | None) -> str:
        return f"{a / b:.2f}x" if a and b else "n/a"

    rows = [("cold compile, wall s (median)", "cold_wall_s"),
            ("cold compile, CPU s (median)", "cold_cpu_s"),
            ("unchanged source (cache hit), wall s", "hit_wall_s")]
    head = f"| {result['backend']}, {result.get('concurrency', 1)} at once | {first} | fastbuild |"
    lines = [head + " first / fastbuild |", "|---|---|---|---|"]
    lines += [f"| {name} | {cell(s[k])} | {cell(f[k])} | {ratio(s[k], f[k])} |" for name, k in rows]
    setup = [r["wall_s"] for r in result["pch_setup"] if r["ok"]]
    lines.append(f"\nbuilds per arm: {s['builds']} (failed: {first} {s['failed']}, fastbuild "
                 f"{f['failed']}); PCH set-up: "
                 f"{', '.join(f'{x:.1f}' for x in setup) or 'n/a'} s; "
                 f"machine: {result['machine']['cpus']} CPUs, load before "
                 f"{result['machine']['load_before']}")
    return "\n".join(lines)


def _machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "load_before": _load(),
            "ccache_on_path": bool(__import__("shutil").which("ccache"))}


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["cpp", "cuda"], default="cpp")
    parser.add_argument("--candidates", type=Path, default=None,
                        help="folder of candidate files (default: experiments/bench/candidates/BACKEND)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="use the first N candidates")
    parser.add_argument("--arch", default=None, help="TORCH_CUDA_ARCH_LIST of accelerated builds")
    parser.add_argument("--stock-arch", default=None,
                        help="TORCH_CUDA_ARCH_LIST of stock builds (default: torch detects the GPU; "
                        "where none is visible, --arch)")
    parser.add_argument("--ccache", default="auto", help="auto | off | PATH of a ccache binary")
    parser.add_argument("--jobs", type=int, default=None, help="MAX_JOBS of accelerated builds")
    parser.add_argument("--cache", type=Path, default=None,
                        help="fastbuild cache (default: a fresh temporary folder)")
    parser.add_argument("--versus", choices=sorted(VERSUS), default="stock",
                        help="the first arm: stock torch, or fastbuild with nvcc's steps serial")
    parser.add_argument("--concurrency", type=int, default=1, help="builds at once (default 1)")
    parser.add_argument("--out", type=Path, default=Path("compile_bench.json"))
    args = parser.parse_args(argv)

    folder = args.candidates or CANDIDATES / args.backend
    candidates = sorted(folder.glob("*.py"))[: args.limit]
    if not candidates:
        parser.error(f"no candidates in {folder}")
    stock_arch = args.stock_arch
    if args.backend == "cuda" and stock_arch is None and not _gpu_visible():
        stock_arch = args.arch
    with tempfile.TemporaryDirectory(prefix="kr-bench-cache-") as fresh:
        cache = args.cache or Path(fresh)
        start = time.monotonic()
        command = " ".join(["python -m experiments.bench.compile_bench", *(argv or sys.argv[1:])])

        def write(record: dict, line: str = "") -> None:
            record.update(command=command, total_s=round(time.monotonic() - start, 1))
            args.out.write_text(json.dumps(record, indent=1))
            if line:
                print(line, flush=True)
        result = measure(args.backend, candidates, repeats=args.repeats, cache_dir=cache,
                         arch=args.arch, ccache=args.ccache, jobs=args.jobs, stock_arch=stock_arch,
                         versus=args.versus, concurrency=args.concurrency, progress=write)
    write(result)
    print(markdown(result))
    print(f"\nwrote {args.out}")
    return 0


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


if __name__ == "__main__":
    sys.exit(main())
