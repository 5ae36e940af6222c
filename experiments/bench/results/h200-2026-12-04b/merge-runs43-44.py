"""How throughput-runs43-44.json and docs/data/p2-h200.json were made from the two parts and
their job logs (run from the repository root):
    python experiments/bench/results/h200-2026-12-04b/merge-runs43-44.py
"""
import json
from pathlib import Path
from experiments.bench.testlog import busy_seconds
from experiments.bench.throughput_report import merge, summary
R = Path("experiments/bench/results/h200-2026-12-04b")
parts = []
for result, log in (("run43-framework-part1of2.json", "run43-joblog-framework-part1of2.jsonl"),
                    ("run44-framework-part2of2.json", "run44-joblog-framework-part2of2.jsonl")):
    part = json.loads((R / result).read_text())
    rows = [json.loads(line) for line in (R / log).read_text().splitlines()]
    part["framework"]["device_busy_s"] = busy_seconds(rows)  # each log holds its one arm only
    parts.append(part)
merged = merge(parts)
merged["summary"] = summary(merged)
merged.update(merged["summary"])
(R / "throughput-runs43-44.json").write_text(json.dumps(merged, indent=1, default=str))
Path("docs/data/p2-h200.json").write_text(json.dumps(merged["summary"], indent=1) + "\n")
print(merged["framework"]["device_busy_s"], merged["framework"]["parts_wall_s"], merged["summary"])
