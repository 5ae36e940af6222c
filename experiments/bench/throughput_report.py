"""What experiments/bench/throughput.py reports from its arms' results: candidates per hour, the
issue-13 record (docs/data/p2-h200.json), local-vs-Ray verdicts, the Markdown table, and arms of
separate calls merged into one result. Pure functions of the result dict.
"""

from __future__ import annotations

import statistics

from feedback.worker.sampling import spread

DEVICE_STAGES = ("correct", "timing", "profile")
ARMS = ("framework", "baselined", "stock", "ray")
TIMED_PROGRAMS = (("candidate", "runtime"), ("eager", "eager"), ("compiled", "compiled"))
"""A row's `ms` key (the timed medians its speed-ups came from), and the EvalResult field of each."""


def per_hour(result: dict, arm: str) -> float | None:
    """Candidates of the run / the arm's wall time, per hour; None when the arm did not run."""
    data = result.get(arm)
    return round(result["candidates"] / data["wall_s"] * 3600, 1) \
        if data and data["wall_s"] else None


def summary(result: dict) -> dict:
    """The issue-13 record (docs/data/p2-h200.json), computed from this run's arms only.

    `build_median_s`: the framework arm's median compile stage; `device_s_per_candidate`: the
    seconds in which some job of the arm held the device (`device_busy_s`: candidates' and
    baselines' jobs, from the job log), per candidate. A result from before the job log was kept
    has no `device_busy_s`: then its correctness + timing + profile stage seconds per candidate
    that reached them, which include the waits for the device.
    """
    fw = result.get("framework") or {}
    rows = fw.get("rows", [])
    device = [sum(r["stage_seconds"].get(s, 0.0) for s in DEVICE_STAGES) for r in rows
              if any(s in r["stage_seconds"] for s in DEVICE_STAGES)]
    busy = fw.get("device_busy_s")
    names = [r["device"] for arm in ("framework", "ray") for r in (result.get(arm) or {})
             .get("rows", []) if r.get("device")]
    return {"date": result["date"], "device": names[0] if names else None,
            "candidates": result["candidates"], "problems": result["problems"],
            "framework_per_hour": per_hour(result, "framework"),
            "baselined_per_hour": per_hour(result, "baselined"),
            "kernelbench_per_hour": per_hour(result, "stock"),
            "ray_per_hour": per_hour(result, "ray"),
            "build_median_s": fw.get("stage_s", {}).get("compile", {}).get("median"),
            "device_s_per_candidate": round(busy / len(rows), 2) if busy is not None and rows
            else round(sum(device) / len(device), 2) if device else None}


def differing_verdicts(result: dict) -> list[str] | None:
    """Files whose status differs between the framework and ray arms (None: not both ran)."""
    if not (result.get("framework") and result.get("ray")):
        return None
    ray = {r["file"]: r["status"] for r in result["ray"]["rows"]}
    return [f"{r['file']}: local {r['status']}, ray {ray.get(r['file'])}"
            for r in result["framework"]["rows"] if ray.get(r["file"]) != r["status"]]


def timing_shift(before: list[dict], after: list[dict]) -> dict:
    """How `after`'s timed medians compare with `before`'s, candidate by candidate (rows of the
    same files, `ok` in both, with their `ms`): per program (candidate, eager, compiled), how many
    candidates, and the median, least and most of after / before. A change to scheduling is an
    honest gain only where these stay near 1 (within P3's spread): slower baselines flatter
    every candidate's speed-up."""
    def timed(rows: list[dict]) -> dict[str, dict]:
        return {r["file"]: r.get("ms") or {} for r in rows if r["status"] == "ok"}
    a, b = timed(before), timed(after)
    shift = {}
    for program, _ in TIMED_PROGRAMS:
        ratios = sorted(b[f][program] / a[f][program] for f in sorted(a.keys() & b.keys())
                        if a[f].get(program) and b[f].get(program))
        if ratios:
            shift[program] = {"candidates": len(ratios),
                              "median": round(statistics.median(ratios), 4),
                              "least": round(ratios[0], 4), "most": round(ratios[-1], 4)}
    return shift


def markdown(result: dict) -> str:
    """One row per arm: wall time, candidates/hour, statuses, median seconds per stage."""
    n = result["candidates"]
    lines = ["| arm | candidates | wall s | candidates/hour | ok | median s per stage |",
             "|---|---|---|---|---|---|"]
    for arm in ARMS:
        data = result.get(arm)
        if not data:
            continue
        ok = sum(r["status"] == "ok" for r in data["rows"])
        stages = ", ".join(f"{k} {v['median']}" for k, v in data["stage_s"].items() if v["n"])
        lines.append(f"| {arm} | {n} | {data['wall_s']} | {per_hour(result, arm) or 0:.0f} | {ok} "
                     f"| {stages} |")
    if result.get("baselined"):
        lines.append(f"\nbaselined: the problems' baselines timed before the arm "
                     f"{result['baselined'].get('baseline_setup_s')} s (not in its wall time)")
    if result.get("framework"):
        fw = result["framework"]
        lines.append(f"\nframework: PCH set-up before the run (once per flag set) "
                     f"{fw['pch_setup_s']} s; builds that used a PCH: {fw['builds_with_pch']} "
                     f"of {fw['builds_seen']}")
    for arm in ("framework", "baselined"):
        lines += _device_lines(arm, result.get(arm) or {})
    differ = differing_verdicts(result)
    if differ is not None:
        lines.append(f"ray arm: ray.init {result['ray'].get('ray_init_s')} s (not in its wall time); "
                     f"verdicts {'as the framework arm' if not differ else 'DIFFER: ' + '; '.join(differ)}")
    return "\n".join(lines)


def _device_lines(arm: str, data: dict) -> list[str]:
    """Where a local arm's CPU seconds went (cpuload), and its device seconds (its job log): the
    timeline, how many jobs held it when it was held only shared, and an average job of each
    kind."""
    from experiments.bench.cpuload import describe
    from experiments.bench.testlog import per_job

    cpu = [f"\n{arm} {describe(data['cpu'])}"] if data.get("cpu", {}).get("span_s") else []
    device = data.get("device")
    if not device:
        return cpu
    lines = [*cpu, f"\n{arm} device: " + ", ".join(f"{k} {v}" for k, v in device.items()
                                                   if not isinstance(v, dict))]
    if device.get("shared_by_holders_s"):
        lines.append(f"{arm} device held only shared, seconds by jobs holding it: "
                     + ", ".join(f"{k}: {v}" for k, v in device["shared_by_holders_s"].items()))
    lines += [f"- {line}" for line in per_job(data.get("jobs") or {})]
    counts = sample_counts(data.get("rows") or [])
    if counts:
        lines.append(f"{arm} timed samples: " + ", ".join(
            f"{program} {c['samples']} over {c['programs']} (most {c['most']}"
            + "".join(f", {label} {c[key]}" for key, label in (("spread_pct", "spread %"),
                                                              ("launch_ms", "launch ms"))
                      if key in c) + ")"
            for program, c in counts.items()))
    return lines


def sample_counts(rows: list[dict]) -> dict[str, dict]:
    """Per program (candidate, eager, compiled), the timed samples the rows' programs took: how
    many programs, their samples summed, and the most one took. Sampling goes on while a median's
    standard error is above `timing_se`, so the sums say which programs held the device longest
    for their timed windows (H100 run 101: the compiled baselines, 1,588 of 2,661). Where the
    rows keep each program's statistics (`timing`), also the median over programs of their
    samples' interquartile range (`spread_pct`, percent of their median: what makes a program
    need more samples) and of their host launch time a call (`launch_ms`)."""
    counts: dict[str, dict] = {}
    for program, _ in TIMED_PROGRAMS:
        ns = [r["samples"][program] for r in rows if program in (r.get("samples") or {})]
        if not ns:
            continue
        counts[program] = {"programs": len(ns), "samples": sum(ns), "most": max(ns)}
        stats = [t for r in rows if (t := (r.get("timing") or {}).get(program))]
        spreads = [100 * s for t in stats if (s := spread(t.get("samples_ms") or [])) is not None]
        launches = [t["launch_ms"] for t in stats if t.get("launch_ms") is not None]
        if spreads:
            counts[program]["spread_pct"] = round(statistics.median(spreads), 2)
        if launches:
            counts[program]["launch_ms"] = round(statistics.median(launches), 3)
    return counts


def merge(results: list[dict]) -> dict:
    """One result from outputs of separate calls on the same candidates: each arm once, or in
    parts (`--part K/N`: each candidate in exactly one part of the arm). An arm's parts ran one
    after another, so its wall time is theirs summed (each part's pipeline fills and drains on
    its own: no arm gains from being cut); its rows are in the folder's order."""
    arms: dict[str, list[tuple[tuple[int, int], dict]]] = {}
    for r in results:
        for arm in (a for a in ARMS if a in r):
            arms.setdefault(arm, []).append((tuple(r.get("part") or (1, 1)), r[arm]))
    merged = {k: v for k, v in results[0].items() if k not in (*ARMS, "part")}
    merged["command"] = [r["command"] for r in results]
    files = None
    for arm, parts in arms.items():
        parts.sort(key=lambda p: p[0][0])
        if [k for (k, _), _ in parts] != list(range(1, parts[0][0][1] + 1)) \
                or len({n for (_, n), _ in parts}) != 1:
            raise ValueError(f"arm {arm} is in more than one output" if len(parts) > 1
                             and all(k == parts[0][0] for k, _ in parts) else
                             f"arm {arm}: parts {[k for k, _ in parts]} are not 1..N of one N")
        merged[arm] = _joined(arm, [data for _, data in parts])
        names = [row["file"] for row in merged[arm]["rows"]]
        if files is None:
            files = names
        elif names != files:
            raise ValueError(f"arm {arm} ran on other candidates than the first output's")
    if len(results) > 1 and any(r.get("part") for r in results):
        merged["candidates"] = len(files or [])
        merged["problems"] = _problems(merged, results)
    return merged


def _problems(merged: dict, results: list[dict]) -> int:
    """Distinct problems over an arm's rows (rows without their problem: the largest part's
    count, a lower bound)."""
    rows = next(merged[a]["rows"] for a in ARMS if a in merged)
    if all("problem" in row for row in rows):
        return len({row["problem"] for row in rows})
    return max(r["problems"] for r in results)


SUMMED = ("wall_s", "pch_setup_s", "baseline_setup_s", "ray_init_s", "compile_phase_s",
          "eval_phase_s", "builds_with_pch", "builds_seen", "device_busy_s")


def _joined(arm: str, parts: list[dict]) -> dict:
    """An arm's parts as one: rows in order, times summed, stage figures over all rows."""
    if len(parts) == 1:
        return parts[0]
    joined = {key: round(sum(p[key] for p in parts), 1) for key in SUMMED
              if all(key in p for p in parts)}  # a figure some part lacks is not summed
    # the folder's order (its files sorted by name): a part holds dealt, not consecutive, rows
    joined["rows"] = sorted((row for p in parts for row in p["rows"]), key=lambda r: r["file"])
    joined["parts_wall_s"] = [p["wall_s"] for p in parts]
    joined["stage_s"] = stage_stats(arm, joined["rows"])
    return joined


STOCK_STAGES = {"compile": "build_s", "correct": "correct_s", "timing": "timing_s",
                "eval_process": "eval_process_s"}


def stage_stats(arm: str, rows: list[dict]) -> dict[str, dict]:
    """Per stage: how many candidates reached it, their seconds summed, the median."""
    if arm == "stock":
        return {stage: _stats([r.get(key) for r in rows]) for stage, key in STOCK_STAGES.items()}
    return {s: _stats([r["stage_seconds"].get(s) for r in rows])
            for s in ("static", "compile", *DEVICE_STAGES)}


def _stats(values: list) -> dict[str, float | int | None]:
    import statistics

    xs = [v for v in values if v is not None]
    return {"n": len(xs), "sum": round(sum(xs), 2) if xs else None,
            "median": round(statistics.median(xs), 2) if xs else None}