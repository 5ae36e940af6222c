"""`python -m experiments.report RUN_DIR... --out REPORT_DIR`: report.md, report.html, PNGs.

Every number in a table or a plot is computed here by `experiments.metrics` from the stored
attempts; nothing is read from the agent's own summaries. Figures: fast_p against p per level,
fast_1@N per feedback mode (the paper's Figure 6), fast_1 against budget (calls, tokens,
dollars), speedup distribution per level, failure breakdown (the paper's Figure 2).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments import metrics as m
from experiments import plots
from experiments.budget import budget_at, spend
from experiments.document import Block, Heading, Image, Table, Text, to_html, to_markdown
from experiments.runs import Run, load_run
from experiments.tables import fmt_score
from problems.cli import CLIParser

P_TABLE = (0.0, 0.5, 1.0, 1.5, 2.0)
P_CURVE = tuple(round(0.1 * i, 1) for i in range(31))
STATUS_ORDER = ("ok", "mismatch", "shape_mismatch", "runtime_error", "timeout", "compile_error",
                "static_reject", "guard_violation", "no_code", "missing")
BASELINES = {"eager": "eager PyTorch", "compile": "torch.compile"}


@dataclass(frozen=True)
class Stats:
    """Bootstrap settings shared by every figure of one report."""

    resamples: int = 1000
    seed: int = 0


def labels(runs: Sequence[Run]) -> list[str]:
    """Legend names made of what differs between the runs (a run's id breaks remaining ties)."""
    def parts(r: Run) -> dict[str, str]:
        c = r.config
        budget = f"N={c.get('turns')}" if r.mode == "refine" else f"k={c.get('k')}"
        return {"mode": r.mode, "feedback": c.get("feedback") if r.mode == "refine" else "",
                "budget": budget, "model": c.get("model"), "backend": c.get("backend"),
                "size": c.get("size"), "problems": c.get("problems"),
                "device": ", ".join(r.devices())}

    table = [parts(r) for r in runs]
    varying = [k for k in table[0] if len({str(t[k]) for t in table}) > 1] if table else []
    keys = varying or ["mode", "feedback", "budget"]
    names = [" ".join(str(t[k]) for k in keys if t[k]) for t in table]
    if len(set(names)) < len(names):  # alike in every setting: only the id tells them apart
        names = [r.record.run_id for r in runs] if not varying else \
            [f"{n} [{r.record.run_id}]" for n, r in zip(names, runs)]
    return names


def fast_p_rows(runs, names, baseline: m.Baseline, stats: Stats) -> list[list[object]]:
    """Per run and level: fast_p at the run's whole budget for each p of P_TABLE."""
    rows = []
    for run, name in zip(runs, names):
        for level, layout in run.by_level().items():
            rows.append([name, level, len(layout.problems)] + [fmt_score(m.fast_p_final(
                run.grid, layout, p, baseline, run.noise_margin, stats.resamples, stats.seed))
                for p in P_TABLE])
    return rows


def headline_rows(runs, names, stats: Stats) -> list[list[object]]:
    rows = []
    for run, name in zip(runs, names):
        g, lay, r, s = run.grid, run.layout, stats.resamples, stats.seed
        finals = m.final_kernels(g, lay, run.noise_margin)
        rows.append([name, run.mode, run.budget_size,
                     fmt_score(m.fast_p_final(g, lay, 0, "eager", run.noise_margin, r, s)),
                     fmt_score(m.fast_p_final(g, lay, 1, "eager", run.noise_margin, r, s)),
                     fmt_score(m.fast_p_final(g, lay, 1, "eager", run.noise_margin, r, s,
                                              lower=True)),
                     fmt_score(m.fast_p_final(g, lay, 1, "compile", run.noise_margin, r, s)),
                     fmt_score(m.geomean_speedup(finals, "eager", r, s), percent=False),
                     fmt_score(m.compile_rate(g, lay, r, s)),
                     fmt_score(m.correct_rate(g, lay, r, s))])
    return rows


def kernel_rows(runs, names) -> list[list[object]]:
    """Each run's selected kernels: the published speedup with its noise interval, and the
    measurement it was selected on when a confirmation timing replaced it."""
    rows = []
    for run, name in zip(runs, names):
        confirmations = getattr(run.grid, "confirmations", {})
        for (problem, index), a in sorted(m.final_kernels(run.grid, run.layout,
                                                          run.noise_margin).items()):
            if a is None:
                continue
            c, bounds = a.candidate, m.speedup_interval(a, "eager")
            chosen = run.grid.get((c.problem_id, c.index, c.turn))
            shown = f"{m.speedup(a):.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "-"
            picked = m.speedup(chosen)
            rows.append([name, problem, index, c.turn, shown,
                         "yes" if (c.problem_id, c.index, c.turn) in confirmations else "no",
                         f"{picked:.3f}" if picked is not None else "-"])
    return rows


def failure_rows(runs, names) -> list[list[object]]:
    rows = []
    for run, name in zip(runs, names):
        for which, turn in (("all attempts", None), ("first turn", 0)):
            counts = m.status_counts(run.grid, run.layout, turn)
            total = sum(counts.values())
            rows.append([name, which, total] + [
                f"{counts[s]} ({100 * counts[s] / total:.0f}%)" if counts[s] else "0"
                for s in STATUS_ORDER])
    return rows


def budget_rows(runs, names) -> list[list[object]]:
    rows = []
    for run, name in zip(runs, names):
        b = spend(run.attempts())
        rows.append([name, run.mode, run.budget_size, len(run.layout.problems), b.calls,
                     b.prompt_tokens, b.completion_tokens, b.dollars_text,
                     round(b.gpu_seconds, 1)])
    return rows


def _series(label: str, xs, scores: Sequence[m.Score]) -> plots.Series:
    return plots.Series(label, list(xs), [s.value for s in scores], [s.low for s in scores],
                        [s.high for s in scores])


def _at(run: Run, layout: m.Layout, n: int, p: float, stats: Stats) -> m.Score:
    """fast_p after a budget of n calls: fast_p@N for refinement, fast_p@k for sampling."""
    if run.mode == "refine":
        return m.fast_p_at_n(run.grid, layout, n, p, "eager", run.noise_margin,
                             stats.resamples, stats.seed)
    return m.fast_p_at_k(run.grid, layout, n, p, "eager", stats.resamples, stats.seed)


def _levels(runs: Sequence[Run]) -> list[str]:
    return sorted({lv for r in runs for lv in r.by_level()}, key=lambda s: (s == "all", s))


def figures(runs, names, out: Path, stats: Stats) -> list[Block]:
    """Draw every figure into `out`; return the blocks that show them."""
    blocks: list[Block] = []
    levels = _levels(runs)
    curve = {lv: [_series(n, P_CURVE, [m.fast_p_final(r.grid, r.by_level()[lv], p, "eager",
                          r.noise_margin, stats.resamples, stats.seed) for p in P_CURVE])
                  for r, n in zip(runs, names) if lv in r.by_level()] for lv in levels}
    plots.line_panels(curve, out / "fast_p_vs_p.png", "fast_p against the speedup threshold p "
                      "(vs eager), per level", "speedup threshold p (x eager)",
                      "fast_p (% of problems)", marker="")
    blocks.append(Image("fast_p_vs_p.png", "fast_p vs p per level"))

    refine = [(r, n) for r, n in zip(runs, names) if r.mode == "refine"]
    if refine:
        by_n = {lv: [_series(n, range(1, r.layout.turns + 1), [_at(
            r, r.by_level()[lv], k, 1.0, stats) for k in range(1, r.layout.turns + 1)])
            for r, n in refine if lv in r.by_level()] for lv in levels}
        plots.line_panels(by_n, out / "fast1_at_n.png", "fast_1@N: best-so-far after N "
                          "refinement turns, per feedback mode", "turns N (LLM calls per "
                          "trajectory)", "fast_1@N (% of problems)")
        blocks.append(Image("fast1_at_n.png", "fast_1@N vs N per feedback mode"))

    axes = {"LLM calls": lambda b: b.calls, "tokens": lambda b: b.tokens,
            "dollars": lambda b: b.dollars}
    xlabels = {"LLM calls": "LLM calls per problem", "dollars": "USD per problem",
               "tokens": "tokens per problem (prompt + completion)"}
    panels, unpriced = {}, []
    for axis, pick in axes.items():
        panels[axis] = []
        for r, n in zip(runs, names):
            sizes = range(1, r.budget_size + 1)
            xs = [pick(budget_at(r.grid, r.layout, k)) for k in sizes]
            if any(x is None for x in xs):
                unpriced.append(n)
                continue
            panels[axis].append(_series(n, xs, [_at(r, r.layout, k, 1.0, stats) for k in sizes]))
    plots.line_panels(panels, out / "budget.png", "Sampling vs refinement: fast_1 (vs eager, all "
                      "levels) against the mean spend per problem", xlabels,
                      "fast_1 (% of problems)", empty="prices unknown (not zero)")
    blocks.append(Image("budget.png", "fast_1 against calls, tokens and dollars"))
    if unpriced:
        blocks.append(Text("No dollar curve for " + ", ".join(sorted(set(unpriced)))
                           + ": some calls have no known price (an unknown cost is not zero)."))

    boxes = {lv: {n: [s for (q, _), a in m.final_kernels(r.grid, r.layout, r.noise_margin).items()
                      if (s := m.speedup(a)) is not None and (lv == "all" or
                                                              f"level{r.levels[q]}" == lv)]
                  for r, n in zip(runs, names)} for lv in levels}
    plots.box_panels(boxes, out / "speedups.png", "Speedup over eager of each run's final "
                     "correct kernels, per level", "speedup (x eager, log scale)")
    blocks.append(Image("speedups.png", "speedup distribution per level"))

    shares = {n: m.status_counts(r.grid, r.layout) for r, n in zip(runs, names)}
    plots.stacked_shares(shares, STATUS_ORDER, out / "failures.png",
                         "Outcome of every attempt asked for (missing = never made)")
    blocks.append(Image("failures.png", "failure breakdown by status"))
    return blocks


def run_rows(runs, names) -> list[list[object]]:
    rows = []
    for run, name in zip(runs, names):
        c = run.config
        rows.append([name, run.record.run_id, run.mode, c.get("model"),
                     c.get("feedback") if run.mode == "refine" else "-", run.budget_size,
                     run.layout.indices if run.mode == "refine" else "-", c.get("backend"),
                     c.get("size"), len(run.layout.problems),
                     f"{len(set(run.grid) & set(run.layout.asked()))}/{len(run.layout.asked())}",
                     ", ".join(run.devices()) or "-",
                     (run.record.git_commit or "?")[:10] + ("+dirty" if run.record.git_dirty
                                                            else "")])
    return rows


def build(run_dirs: Sequence[Path], out: Path, stats: Stats = Stats()) -> Path:
    """Write report.md, report.html and the PNGs into `out`; return the Markdown path."""
    runs = [load_run(Path(d)) for d in run_dirs]
    if not runs:
        raise ValueError("no run directories given")
    out.mkdir(parents=True, exist_ok=True)
    names = labels(runs)
    ci = f"95% percentile bootstrap over problems, {stats.resamples} resamples, seed {stats.seed}"
    blocks: list[Block] = [
        Heading("kernel-refine report", 1),
        Text(f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} from "
             f"{len(runs)} run(s). Cells read `value (hits/denominator) [CI]`, CI = {ci}. "
             "An attempt that was asked for but never stored counts as a failure. fast_p: "
             "correct and speedup > p (p = 0: correct); refinement runs use the best-so-far "
             "after all N turns, sampling runs the unbiased fast_p@k at k = all samples."),
        Heading("Runs"),
        Table(["run", "id", "mode", "model", "feedback", "N or k", "trajectories", "backend",
               "size", "problems", "attempts stored/asked", "evaluated on", "git"], run_rows(runs, names)),
        Heading("Headline"),
        Table(["run", "mode", "N or k", "fast_0", "fast_1 (eager)",
               "fast_1 (eager, beyond noise)", "fast_1 (compile)",
               "geomean speedup (eager, correct kernels)", "compile rate (attempts)",
               "correct rate (attempts)"], headline_rows(runs, names, stats)),
    ]
    for baseline, title in BASELINES.items():
        blocks += [Heading(f"fast_p per level vs {title}"),
                   Table(["run", "level", "problems"] + [f"fast_{p:g}" for p in P_TABLE],
                         fast_p_rows(runs, names, baseline, stats))]
    blocks += [Heading("Selected kernels"),
               Text("Speedup vs eager of each run's final kernel, with its interval from the "
                    "measured noise of candidate and baseline (metrics.speedup_interval); "
                    "\"beyond noise\" counts fast_1 on the interval's low end. Where a "
                    "confirmation timing exists (python -m experiments.confirm) the published "
                    "speedup is that separate measurement, and the one the kernel was selected "
                    "on is shown beside it."),
               Table(["run", "problem", "trajectory", "turn", "speedup [interval]", "confirmed",
                      "selected at"], kernel_rows(runs, names))]
    blocks += [Heading("Figures")] + figures(runs, names, out, stats)
    blocks += [Heading("Failure breakdown by status"),
               Table(["run", "which", "asked"] + list(STATUS_ORDER), failure_rows(runs, names)),
               Heading("Budget actually spent"),
               Table(["run", "mode", "N or k", "problems", "LLM calls", "prompt tokens",
                      "completion tokens", "dollars", "GPU-seconds"], budget_rows(runs, names))]
    notes = [f"{n}: {w}" for r, n in zip(runs, names) for w in r.warnings]
    if notes:
        blocks += [Heading("Warnings")] + [Text(w) for w in notes]
    (out / "report.html").write_text(to_html(blocks, "kernel-refine report"))
    path = out / "report.md"
    path.write_text(to_markdown(blocks))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = CLIParser(prog="python -m experiments.report", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="Run directories.")
    parser.add_argument("--out", type=Path, required=True, help="Report folder (created).")
    parser.add_argument("--resamples", type=int, default=1000, help="Bootstrap resamples.")
    parser.add_argument("--seed", type=int, default=0, help="Bootstrap seed.")
    args = parser.parse_args(argv)
    if args.resamples < 1:
        parser.error(f"argument --resamples: must be at least 1, got {args.resamples}")
    try:
        path = build(args.runs, args.out, Stats(args.resamples, args.seed))
    except (FileNotFoundError, ValueError) as e:  # not a run directory, an unreadable run
        parser.fail(e)
    print(f"wrote {path} and {path.with_suffix('.html')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
