"""The hardening's pure parts, fast and in-process: the library-op policy, the own-code counter,
the parent's check of the channel, the audit hook's verdicts, the unseen size."""

from __future__ import annotations

import importlib.util
import math
import textwrap

import pytest

from feedback.job import WorkerJob, WorkerReport
from feedback.options import EvalOptions
from feedback.policy import family, library_violation, own_code_violation
from feedback.result import Correctness, Status, TimingStats
from feedback.worker import audit, channel, sizes
from feedback.worker.owncode import OwnCode
from problems.module import load_module
from problems.spec import select

RELU_OPS = {"aten::relu": 1}
MATMUL_OPS = {"aten::mm": 1}


@pytest.mark.parametrize("op,fam", [("aten::addmm", "matmul"), ("aten::_convolution", "convolution"),
                                    ("aten::mkldnn_convolution", "convolution"),
                                    ("aten::clamp_min", "relu"), ("aten::_softmax", "softmax"),
                                    ("aten::native_layer_norm", "norm"),
                                    ("aten::_native_batch_norm_legit_no_training", "norm"),
                                    ("aten::max_pool2d_with_indices", "pool"), ("aten::add_", "add")])
def test_operator_families(op, fam):
    assert family(op) == fam


def test_glue_policy_refuses_redoing_the_reference_and_allows_partial_replacement():
    assert "aten::mm" in library_violation("glue", {"aten::mm": 1, "aten::empty": 1}, MATMUL_OPS)
    assert library_violation("glue", {"aten::clamp": 1}, RELU_OPS)  # a synonym of the reference
    assert library_violation("glue", {"aten::empty_like": 1, "aten::view": 2}, RELU_OPS) is None
    conv_bias_relu = {"aten::convolution": 1, "aten::add": 1, "aten::relu": 1}
    assert library_violation("glue", {"aten::convolution": 1}, conv_bias_relu) is None  # fused rest
    assert library_violation("glue", {"kr_ops::fused": 1}, conv_bias_relu) is None  # custom op: own
    assert library_violation("allow", {"aten::mm": 1}, MATMUL_OPS) is None


def test_strict_policy_allows_only_glue():
    assert library_violation("strict", {"aten::empty_like": 1, "aten::contiguous": 1}, RELU_OPS) is None
    message = library_violation("strict", {"aten::addmm": 1}, {"aten::addmm": 1, "aten::relu": 1})
    assert "aten::addmm" in message and "strict" in message


def test_library_kernels_seen_by_the_profiler_count_as_library_calls():
    kernels = ["sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8", "my_relu_kernel"]
    assert "gemm" in library_violation("glue", {}, MATMUL_OPS, candidate_kernels=kernels)
    assert library_violation("glue", {}, MATMUL_OPS, candidate_kernels=["my_tiled_kernel"]) is None


def test_own_code_violation_names_the_calls():
    assert own_code_violation([]) is None
    assert "did not run on 1 scored call" in own_code_violation(["trial 1"])


def _module(tmp_path, source: str, name: str = "cand"):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def test_own_code_counts_triton_launches_from_the_candidates_file(tmp_path):
    pytest.importorskip("triton")
    path, module = _module(tmp_path, """
        import torch, triton, triton.language as tl
        @triton.jit
        def kernel(x_ptr, n, BLOCK: tl.constexpr):
            pass
        def launch():
            try:
                kernel[(1,)](torch.zeros(4), 4, BLOCK=4)   # no GPU here: fails after the launch call
            except Exception:
                pass
        def fallback():
            return torch.relu(torch.zeros(4))
    """)
    own = OwnCode(str(tmp_path / "ext"), str(path))
    assert own.run(module.launch)[1] == 1
    assert own.run(module.fallback)[1] == 0


def _job(kind: str = "correct", **options) -> WorkerJob:
    problem = select("suite:level1/19").problems[0]
    return WorkerJob(kind=kind, problem=problem, backend="cpp", options=EvalOptions(**options),
                     extensions_dir="/x", scratch_dir="/x", result_path="/x/r", nonce="n" * 32)


def _frames(report: WorkerReport, nonce: str = "n" * 32) -> str:
    return channel.hello("correct", "candidate", nonce) + "\n" + report.model_dump_json() + "\n"


def _report(**fields) -> WorkerReport:
    base = {"nonce": "", "status": Status.ok, "kind": "correct", "role": "candidate",
            "problem_id": "level1/19_relu",
            "correctness": Correctness(trials=9, trials_passed=9, max_abs_err=0.0)}
    return WorkerReport(**{**base, **fields})


def test_channel_accepts_hello_and_one_consistent_report():
    report, why = channel.accept(_frames(_report()), _job())
    assert report is not None and why == ""


@pytest.mark.parametrize("text,why", [
    (_frames(_report(), nonce="guessed"), "hello"),
    (_frames(_report()) + _report().model_dump_json() + "\n", "2 reports"),
    (_frames(_report(problem_id="level1/1_square_matmul")), "answers problem_id"),
    (_frames(_report(kind="time")), "answers kind"),
    (_frames(_report(correctness=Correctness(trials=2, trials_passed=2))), "passing with 2 of 2"),
    (_frames(_report(correctness=Correctness(trials=9, trials_passed=8))), "passing with 8 of 9"),
    (_frames(_report(correctness=None)), "without its correctness"),
    (channel.hello("correct", "candidate", "n" * 32) + "\n", "no report"),
    ("", "no report"),
])
def test_channel_refuses_forgeries(text, why):
    report, reason = channel.accept(text, _job())
    assert report is None and why in reason


def test_timing_reports_must_be_consistent():
    job = _job("time", timing_trials=20)
    good = TimingStats(median_ms=1.0, mean_ms=1.1, std_ms=0.1, min_ms=0.9, max_ms=2.0, n=20, clock="host_wall")
    assert channel.check(_report(kind="time", correctness=None, timing=good), job) == ""
    for bad in (good.model_copy(update={"n": 3}), good.model_copy(update={"clock": "cuda_events"}),
                good.model_copy(update={"min_ms": 5.0}), good.model_copy(update={"median_ms": -1.0})):
        assert channel.check(_report(kind="time", correctness=None, timing=bad), job)


def test_a_baselines_report_is_checked_part_by_part():
    job = _job("time", timing_trials=20).model_copy(update={"role": "baselines"})
    good = TimingStats(median_ms=1.0, mean_ms=1.1, std_ms=0.1, min_ms=0.9, max_ms=2.0, n=20, clock="host_wall")

    def part(role: str, **fields) -> WorkerReport:
        return _report(**{"kind": "time", "role": role, "correctness": None, "timing": good,
                          **fields})

    def whole(*parts: WorkerReport, **fields) -> WorkerReport:
        return _report(kind="time", role="baselines", correctness=None, parts=list(parts), **fields)
    failed = part("compiled", status=Status.runtime_error, timing=None, message="compile failed")
    assert channel.check(whole(part("eager"), part("compiled")), job) == ""
    assert channel.check(whole(part("eager"), failed, status=Status.runtime_error), job) == ""
    assert channel.check(whole(status=Status.runtime_error), job) == ""  # failed before its parts
    for bad, why in [
        (whole(part("eager")), "parts are ['eager']"),
        (whole(part("compiled"), part("eager")), "parts are ['compiled', 'eager']"),
        (whole(part("eager"), failed), "disagrees"),
        (whole(part("eager"), part("compiled", timing=good.model_copy(update={"n": 3}))),
         "its compiled part: 3 timed samples"),
        (whole(part("eager", problem_id="level1/1_square_matmul"), part("compiled")),
         "its eager part: the report answers problem_id"),
        (whole(status=Status.ok), "parts are []"),
    ]:
        assert why in channel.check(bad, job)


@pytest.mark.parametrize("warmup,total", [(2, 22), (5, 105), (0, 2), (3, 4), (1, 9)])
def test_timing_probes_one_per_stratum_at_secret_positions_plus_one_after_the_last_call(warmup, total):
    from feedback.worker.probes import PROBES, TimingGuard
    n = total - warmup
    draws = [sorted(TimingGuard(None, "fp64-relative", warmup, total).probe_at) for _ in range(300)]
    for probe_at in draws:
        *timed, final = probe_at
        assert final == total  # a candidate switching behaviour after any number of calls is caught
        assert len(timed) == min(PROBES, n) and all(warmup <= c < total for c in timed)
        # one per stratum: no run of consecutive timed calls without a probe is longer than
        # two strata minus one call, so misbehaving for that long is always caught
        gaps = [b - a - 1 for a, b in zip([warmup - 1, *timed], [*timed, total])]
        assert max(gaps) <= 2 * -(-n // min(PROBES, n)) - 2, probe_at
    if n > PROBES:
        assert len({tuple(p) for p in draws}) > 1  # secret: not the same positions every time


@pytest.mark.parametrize("total,stride", [(10, 4), (30, 4), (100, 13)])
def test_samples_beyond_the_least_get_one_probe_per_block_of_a_stratum_or_min_stride(total, stride):
    """Sampling on until the standard error is met: one probe at a secret position in each block
    of `stride` samples, so a long-sampled program is not probed at a short least's density."""
    from feedback.worker.probes import MIN_STRIDE, PROBES, TimingGuard
    assert stride == max(MIN_STRIDE, -(-total // PROBES))
    for _ in range(50):
        guard = TimingGuard(None, "fp64-relative", 0, total)
        beyond = [c for c in range(total, total + 6 * stride) if guard.is_probe(c)]
        blocks = [(c - total) // stride for c in beyond]  # block 0's may be `total` itself
        assert total in beyond and sorted(set(blocks)) == list(range(6))
        assert len(beyond) <= 7  # the probe at `total`, one per block


def test_audit_refuses_candidate_code_and_lets_trusted_code_pass(tmp_path):
    path, module = _module(tmp_path, """
        import sys
        def frames():
            return getattr(sys, "_getframe")(0)
        def proc():
            return open("/proc/self/status").read()
        def cpuinfo():
            return open("/proc/cpuinfo").read(10)
    """, name="audited")
    log = audit.install()
    log.watch(str(path))
    try:
        with pytest.raises(PermissionError):
            module.frames()
        with pytest.raises(PermissionError):
            module.proc()
        assert module.cpuinfo()  # not this process's internals
        assert open("/proc/self/status").read()  # trusted code (this test) is not audited
    finally:
        log.retire()
    attempts = log.take()
    assert any("frame walking" in a for a in attempts) and any("process internals" in a for a in attempts)
    assert not log.active


def test_unseen_size_keeps_alignment_and_changes_every_knob():
    problem = select("suite:level1/19").problems[0]  # small: BATCH 16, DIM 1024
    described, extra = next(sizes.candidates(problem, "small"))
    values = extra.sizes[sizes.EXTRA]
    assert values["BATCH"] in (32, 48)  # 16 cannot go down a step of 16 or 32
    assert values["DIM"] != 1024 and math.gcd(values["DIM"], 16) == 16
    assert 1 < values["BATCH"] * values["DIM"] / (16 * 1024) <= 1.5  # more elements, not many more
    assert "BATCH=" in described and "DIM=" in described
    assert sizes.moved({"K": 37, "FLAG": True, "NAME": "x"}, 1) == {"K": 38, "FLAG": True, "NAME": "x"}


@pytest.mark.parametrize("r", [1, 2])
def test_unseen_size_stays_about_the_evaluated_size(r):
    """Moving every knob up made level1/26 (BATCH 16, CHANNELS 64, 512 x 512) 5.1 times larger
    at r = 2, which ran out of an 80 GB GPU: knobs that can go down now offset those that cannot,
    and the product stays above 1 (a kernel written for a fixed element count leaves some undone)."""
    current = {"BATCH": 16, "CHANNELS": 64, "HEIGHT": 512, "WIDTH": 512}
    new = sizes.moved(current, r)
    assert all(new[k] != v and math.gcd(new[k], 16) == math.gcd(v, 16) for k, v in current.items())
    assert 1 < math.prod(new.values()) / math.prod(current.values()) <= 1.5
    small = {"BATCH": 8, "IN_CHANNELS": 8, "OUT_CHANNELS": 16, "DEPTH": 32, "HEIGHT": 128, "WIDTH": 128}
    assert 1 < math.prod(sizes.moved(small, r).values()) / math.prod(small.values()) <= 4  # was 84
    coarse = {"K": 32, "M": 96, "N": 48}  # 16 and 32 go down in steps of a third and two thirds
    assert math.prod(sizes.moved(coarse, r).values()) > math.prod(coarse.values())


def test_unseen_size_tries_the_other_step_where_knobs_constrain_each_other():
    problem = select("suite:level1/28").problems[0]  # GroupNorm: CHANNELS % GROUPS == 0
    tried = [extra.sizes[sizes.EXTRA] for _, extra in sizes.candidates(problem, None)]
    module = load_module(problem, None)
    current = {k: getattr(module, k) for k in sizes.knobs(problem)}
    assert sorted(map(str, tried[:2])) == sorted(map(str, (sizes.moved(current, 1), sizes.moved(current, 2))))
    assert tried[2] == problem.sizes["small"]
