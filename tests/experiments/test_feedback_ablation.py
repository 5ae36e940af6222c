"""The shipped feedback-ablation sweep (cpp, replay) gives its three modes the same fast_1 (issue 15).

The replay model gives G, G+E and G+E+P the very same kernels, so any difference in their fast_1
is timing noise reported as a feedback effect. With the selected kernels confirmed by a separate
timing (experiments/confirm.py, one per kernel and machine), the three must agree. Slow: it runs
the whole sweep on the CPU.
"""

from __future__ import annotations

from pathlib import Path

from experiments import metrics as m
from experiments.confirm import CONFIRMATIONS
from experiments.runs import load_run
from experiments.sweep import main as sweep

CONFIG = Path(__file__).resolve().parents[2] / "experiments" / "configs" / "feedback_ablation.yaml"


def test_the_three_feedback_modes_of_a_replayed_transcript_get_the_same_fast_1(tmp_path: Path):
    assert sweep([str(CONFIG), "--out", str(tmp_path)]) == 0
    runs = sorted(p.parent for p in tmp_path.glob("*/config.json"))
    assert len(runs) == 3
    fast1, beyond = {}, {}
    for path in runs:
        assert (path / CONFIRMATIONS).exists()  # the sweep confirmed its selected kernels
        run = load_run(path)
        mode = run.config["feedback"]
        fast1[mode] = m.fast_p_final(run.grid, run.layout, 1, "eager", run.noise_margin,
                                     resamples=0).value
        beyond[mode] = m.fast_p_final(run.grid, run.layout, 1, "eager", run.noise_margin,
                                      resamples=0, lower=True).value
    assert set(fast1) == {"G", "G+E", "G+E+P"}
    assert len(set(fast1.values())) == 1, fast1
    assert len(set(beyond.values())) == 1, beyond
