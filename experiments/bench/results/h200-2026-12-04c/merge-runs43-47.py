"""How throughput-runs43-47.json and docs/data/p2-h200.json were made: the framework arm of runs
43-44 (merged by ../h200-2026-12-04b/merge-runs43-44.py) and the stock arm of runs 45-47 (three
parts of `--part K/3`), all on the same 41 candidates (run from the repository root):
    python experiments/bench/results/h200-2026-12-04c/merge-runs43-47.py
"""
import json
from pathlib import Path

from experiments.bench.throughput_report import merge, summary

R = Path("experiments/bench/results/h200-2026-12-04c")
framework = json.loads(Path("experiments/bench/results/h200-2026-12-04b/throughput-runs43-44.json")
                       .read_text())
stock = [json.loads((R / f).read_text()) for f in ("run45-stock-part1of3.json",
                                                    "run46-stock-part2of3.json",
                                                    "run47-stock-part3of3.json")]
merged = merge([framework, *stock])
merged["summary"] = summary(merged)
merged.update(merged["summary"])
(R / "throughput-runs43-47.json").write_text(json.dumps(merged, indent=1, default=str))
Path("docs/data/p2-h200.json").write_text(json.dumps(merged["summary"], indent=1) + "\n")
print(merged["stock"]["parts_wall_s"], merged["stock"]["wall_s"], merged["summary"])
