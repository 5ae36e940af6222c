"""The `time` job on the cpp backend (host wall-clock): statistics, baselines, replay defences."""

from __future__ import annotations

import pytest
import torch
from workerkit import MATMUL

from feedback.result import Status

HONEST = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""


def test_candidate_timing_statistics_are_sane(kit):
    report = kit.run("time", MATMUL, HONEST, timing_trials=15, warmup=2, input_sets=3, cpu_threads=2)
    assert report.status == Status.ok, report.message
    t = report.timing
    assert 15 <= t.n <= 60 and t.clock == "host_wall"  # sampled until the median settles
    assert t.calls_per_sample >= 1 and len(t.pass_medians_ms) == 2 and t.noise == report.noise
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms and t.min_ms <= t.mean_ms <= t.max_ms
    assert t.std_ms >= 0 and report.noise is not None and report.noise >= 0
    assert report.flops is None and torch.get_num_threads() == 2
    # the candidate's checks, by part: every part ran, and the parts are inside `checks`
    parts = {k: v for k, v in report.phases.items() if k.startswith("checks/")}
    assert set(parts) == {f"checks/{p}" for p in ("outputs", "threads", "spot", "probes",
                                                  "integrity")}
    rounding = 0.0005 * (len(parts) + 1)  # the report keeps each phase to the millisecond
    assert parts["checks/probes"] > 0 and parts["checks/spot"] > 0  # each runs the reference
    assert sum(parts.values()) <= report.phases["checks"] + rounding


def test_eager_baseline_records_flops_and_minimum_bytes(kit):
    report = kit.run("time", MATMUL, None, role="eager")
    assert report.status == Status.ok, report.message
    m, k, n = 32, 1024, 24
    assert report.flops == 2 * m * k * n
    assert report.min_bytes == 4 * (m * k + k * n + m * n)


def test_a_failing_torch_compile_baseline_is_named_as_such(kit):
    report = kit.run("time", MATMUL, None, role="compiled", compile_mode="no-such-mode")
    assert report.status == Status.runtime_error
    assert "torch.compile(mode='no-such-mode')" in report.message and "not the candidate" in report.message


def test_a_baselines_job_times_eager_then_compiled_each_as_its_own_job_would(kit):
    report = kit.run("time", MATMUL, None, role="baselines")
    assert report.status == Status.ok, report.message
    assert [p.role for p in report.parts] == ["eager", "compiled"]
    eager, compiled = report.parts
    assert all(p.status == Status.ok and p.timing is not None and p.timing.n >= 10 and
               p.kind == "time" and p.problem_id == report.problem_id for p in report.parts)
    m, k, n = 32, 1024, 24
    assert eager.flops == 2 * m * k * n and compiled.flops is None  # as the eager job's, alone
    assert report.timing is None and report.phases["windows"] > 0


def test_a_failing_compile_fails_its_part_of_a_baselines_job_and_not_the_eager_part(kit):
    report = kit.run("time", MATMUL, None, role="baselines", compile_mode="no-such-mode")
    eager, compiled = report.parts
    assert eager.status == Status.ok and eager.timing is not None
    assert compiled.status == Status.runtime_error and compiled.timing is None
    assert "torch.compile(mode='no-such-mode')" in compiled.message
    assert report.status == Status.runtime_error and report.message.startswith("the compiled part:")


def test_results_replayed_by_shape_fail_the_recheck_of_timed_outputs(kit):
    # correct on every fresh input set the first time, then replays the first answer
    report = kit.run("time", MATMUL, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.memo = {}
            def forward(self, a, b):
                key = (tuple(a.shape), tuple(b.shape))
                if key not in self.memo:
                    self.memo[key] = a @ b
                return self.memo[key].clone()
    """)
    assert report.status == Status.mismatch
    assert "replayed or memoised" in report.message


def test_results_replayed_by_pointer_are_refused(kit):
    report = kit.run("time", MATMUL, """
        import torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.memo = {}
            def forward(self, a, b):
                key = a.data_ptr()
                if key not in self.memo:
                    self.memo[key] = a @ b
                return self.memo[key]
    """)
    assert report.status in (Status.guard_violation, Status.mismatch), report.message


def test_short_programs_run_several_calls_per_sample_and_each_is_checked(kit):
    honest = kit.run("time", MATMUL, HONEST, timing_trials=12)
    assert honest.status == Status.ok, honest.message
    assert honest.timing.calls_per_sample > 1  # a ~0.05 ms matmul, 2 ms samples
    # wrong only when called right after its previous call returned, i.e. inside a sample,
    # never after the pause before a probe: the spot checks of sampled outputs catch it
    report = kit.run("time", MATMUL, """
        import time, torch, torch.nn as nn
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.last = 0.0
            def forward(self, a, b):
                quick = time.perf_counter() - self.last < 2e-4
                out = torch.zeros(a.shape[0], b.shape[1]) if quick else a @ b
                self.last = time.perf_counter()
                return out
    """, timing_trials=12)
    assert report.status == Status.mismatch, report.message
    assert "replayed or memoised" in report.message


def test_the_spot_checks_take_a_secret_subset_of_a_long_sample_and_all_of_a_short_one():
    from feedback.worker.timing import SPOT_CHECKS, _secret_subset

    short = list(range(SPOT_CHECKS - 1))
    assert _secret_subset(short, SPOT_CHECKS) == short
    long = list(range(512))
    draws = [_secret_subset(long, SPOT_CHECKS) for _ in range(2)]
    for drawn in draws:
        assert len(set(drawn)) == SPOT_CHECKS and set(drawn) <= set(long)
    assert draws[0] != draws[1]  # not a fixed choice a program could learn (chance 1 in C(512,32))


def test_waited_wakes_set_a_short_windows_allowance_from_the_last_few_and_leave_long_ones_alone():
    from types import SimpleNamespace

    from feedback.options import EvalOptions
    from feedback.worker import clocks
    from feedback.worker.timing import WAITED_WAKES_KEPT, _WaitedWakes

    measured = iter([0.30, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10])
    asked = []
    clock = object.__new__(clocks.CudaClock)  # no device here: only what _WaitedWakes touches
    clock.device, clock.wake_floor_ms = SimpleNamespace(type="cuda"), None
    clock.waited_wake = lambda ms: asked.append(ms) or next(measured)
    on = EvalOptions(wake_after_wait=True)
    wakes = _WaitedWakes(clock, 8.0, on)  # 8 ms windows: under half of the 30 ms target
    wakes.measure()
    assert clock.wake_floor_ms == 0.30 and asked == [8.0]  # a wait as long as the window
    for _ in range(6):
        wakes.measure()
    assert len(wakes.seen) == 7
    assert clock.wake_floor_ms == 0.08  # the median of the last WAITED_WAKES_KEPT: the outlier gone
    assert WAITED_WAKES_KEPT == 5
    assert EvalOptions().wake_after_wait  # on by default
    for window, opts in ((20.0, on), (8.0, EvalOptions(wake_after_wait=False))):  # long; off
        clock.wake_floor_ms = None
        _WaitedWakes(clock, window, opts).measure()
        assert clock.wake_floor_ms is None
    cpu = _WaitedWakes(clocks.Clock.__new__(clocks.Clock), 8.0, on)  # the host clock: no wake-up
    assert not cpu.on


def test_a_trusted_clock_leads_by_twice_the_hosts_time_a_call_and_not_ahead_of_a_host_bound_run():
    from feedback.worker import clocks

    clock = object.__new__(clocks.CudaClock)  # no device here: only what lead_ms reads
    clock.lead, clock.launch_ms, clock._call_ms = False, 0.15, 5.0
    assert clock.lead_ms(1) == 0.0  # off: the candidate's clock, or the option off
    clock.lead, clock.launch_ms, clock._call_ms = True, None, None
    assert clock.lead_ms(1) == clocks.LEAD_FIRST_MS  # no window seen yet
    for launch, call, calls, lead in ((0.15, 5.0, 1, 0.30), (0.01, 5.0, 6, clocks.LEAD_MS[0]),
                                      (0.9, 50.0, 1, clocks.LEAD_MS[1]), (0.3, 0.31, 1, 0.6),
                                      (0.05, 0.06, 400, 0.0)):  # the last: host-bound, many calls
        clock.launch_ms, clock._call_ms = launch, call
        assert clock.lead_ms(calls) == pytest.approx(lead), (launch, call, calls)


@pytest.mark.parametrize("role, lead", [("eager", True), ("compiled", True), ("candidate", False)])
def test_only_a_trusted_programs_clock_leads(monkeypatch, role, lead):
    from types import SimpleNamespace

    from feedback.options import EvalOptions
    from feedback.worker import clocks, timing

    asked = []
    monkeypatch.setattr(clocks, "clock_for", lambda device, ahead, lead: asked.append(lead))
    monkeypatch.setattr(timing, "TimingGuard", lambda *args: None)
    monkeypatch.setattr(timing, "_compiled", lambda h, mode: h.reference)
    h = SimpleNamespace(device=torch.device("cpu"), reference=None, candidate=None)
    for on in (True, False):
        job = SimpleNamespace(options=EvalOptions(trusted_lead=on))
        timing._sampler(role, job, h, 10)
    assert asked == [lead, False]
    assert EvalOptions().trusted_lead  # on by default (runs 106-109)
