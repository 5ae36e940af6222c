"""evaluate_many on the cpp backend: bad candidates never stop the batch, results keep input order.

The candidates reuse the OPS_CPP build of the other tests (they differ in Python only); the
pipeline test covers the remaining statuses.
"""

from __future__ import annotations

import contextlib
import time

import pytest
from candidates import cpp_candidate

from feedback.cache import code_hash
from feedback.evaluate import evaluate_many
from feedback.job import standby_served, standby_workers
from feedback.result import Status

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("standby", [False, True], ids=["fresh-workers", "standby-workers"])
def test_a_mixed_batch_finishes_in_order(relu, fast_options, standby):
    """Also with workers started ahead of their jobs (on the CPU too, to exercise them here):
    the same statuses, and standby workers really served jobs."""
    options = fast_options.model_copy(update={"time": False, "memory_limit_mb": 5000,
                                              "run_timeout_s": 60})
    batch = [
        ("crash", cpp_candidate("crash"), Status.runtime_error),
        ("ok", cpp_candidate("relu"), Status.ok),
        ("static", cpp_candidate("relu", extra="\nimport subprocess\n"), Status.static_reject),
        ("memory", cpp_candidate("hog"), Status.runtime_error),  # 3 GiB past a 5000 MB limit
        ("exit", cpp_candidate("leave"), Status.runtime_error),
    ]
    start, served = time.monotonic(), standby_served()
    with standby_workers(cpu=True) if standby else contextlib.nullcontext():
        results = evaluate_many([(relu, code, "cpp") for _, code, _ in batch], options,
                                devices=["cpu"], compile_workers=2)
    assert (standby_served() > served) == standby
    assert [r.status for r in results] == [want for *_, want in batch], \
        [(name, r.status, r.message[:200]) for (name, *_), r in zip(batch, results)]
    assert [r.code_hash for r in results] == [code_hash(code) for _, code, _ in batch]
    memory = results[3]
    assert "memory" in memory.message.lower() or "allocate" in memory.message.lower(), memory.message
    assert results[1].correctness.trials_passed == results[1].correctness.trials
    assert time.monotonic() - start < 600


def test_a_batch_closed_early_counts_its_candidates_out(relu, fast_options):
    """Its candidates share one extensions folder; closed after the first result, inside an
    outer block that keeps the pool open, it leaves no candidate counted as unfinished (a count
    left behind would start workers ahead that nothing uses)."""
    from feedback import job as job_module
    from feedback.evaluate import iter_evaluate

    options = fast_options.model_copy(update={"time": False, "run_timeout_s": 60})
    items = [(relu, cpp_candidate("relu", extra=f"\n# {n}\n"), "cpp") for n in range(3)]
    with standby_workers(cpu=True):
        results = iter_evaluate(items, options, devices=["cpu"], compile_workers=1)
        first = next(results)
        assert sum(job_module._POOL.unfinished.values()) == 2  # the two still running
        results.close()
        assert sum(job_module._POOL.unfinished.values()) == 0
    assert first[1].status == Status.ok, first[1].message


@pytest.fixture
def jobs_run(monkeypatch) -> list[tuple[str, str, bool]]:
    """Every worker job the evaluator runs during the test: (kind, role, alone)."""
    from feedback import evaluate as evaluate_module

    calls = []
    run = evaluate_module._run

    def counted(kind, role, problem, backend, options, paths, alone=False):
        calls.append((kind, role, alone))
        return run(kind, role, problem, backend, options, paths, alone)

    monkeypatch.setattr(evaluate_module, "_run", counted)
    return calls


def test_a_correctness_run_out_of_memory_beside_others_runs_again_alone(relu, fast_options,
                                                                        jobs_run):
    """Correctness jobs share the device, so a job that ran short of memory may have done so for
    the others' memory: it runs once more holding the device alone, and only then is it failed."""
    oom = cpp_candidate("relu").replace(
        "return ops.relu(x)",
        "ops.relu(x)\n        raise RuntimeError('CUDA out of memory. Tried to allocate 2 GiB')")
    options = fast_options.model_copy(update={"time": False, "run_timeout_s": 60})
    (r,) = evaluate_many([(relu, oom, "cpp")], options, devices=["cpu"], compile_workers=1)
    assert r.status == Status.runtime_error and "out of memory" in r.message, r.message
    assert jobs_run == [("correct", "candidate", False), ("correct", "candidate", True)]
    jobs_run.clear()
    (ok,) = evaluate_many([(relu, cpp_candidate("relu"), "cpp")], options, devices=["cpu"],
                          compile_workers=1)
    assert ok.status == Status.ok and jobs_run == [("correct", "candidate", False)]


def test_a_timing_out_of_memory_runs_again_with_the_device_to_itself_from_its_start(
        relu, fast_options, jobs_run):
    """A time job prepares beside correctness jobs and waits for its timed part holding what it
    prepared, so its memory may run short for theirs: it runs once more alone (its set-up under
    the device's lock too) before the verdict stands. The candidate here runs short only after
    its correctness job's calls, in every time job."""
    oom = cpp_candidate("relu").replace(
        "return ops.relu(x)",
        "CALLS.append(1)\n        if len(CALLS) > 60:\n"
        "            raise RuntimeError('CUDA out of memory. Tried to allocate 2 GiB')\n"
        "        return ops.relu(x)") + "\n\nCALLS = []\n"
    options = fast_options.model_copy(update={"compile_baseline": False, "run_timeout_s": 60})
    (r,) = evaluate_many([(relu, oom, "cpp")], options, devices=["cpu"], compile_workers=1)
    assert r.status == Status.runtime_error and r.stage == "timing", (r.stage, r.message)
    assert "out of memory" in r.message, r.message
    mine = [job for job in jobs_run if job[1] == "candidate"]
    assert mine == [("correct", "candidate", False), ("time", "candidate", False),
                    ("time", "candidate", True)], jobs_run


def test_a_float64_reference_short_of_memory_beside_others_is_run_again_not_made_stricter(
        relu, fast_options, jobs_run):
    """Run 54 (H100): the float64 reference of an unseen size ran out of memory beside other
    jobs, the job fell back to kernelbench's 1e-4 (stricter for a 4,128-long sum) and an honest
    reduction was a mismatch. Now the job runs again alone; only there, where running short is
    its own need, does it fall back (and say so)."""
    from problems.loaders import problem_from_source

    source = relu.source.replace(
        "        return torch.relu(x)",
        "        if x.dtype == torch.float64:\n"
        "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 8.00 GiB')\n"
        "        return torch.relu(x)")
    problem = problem_from_source(source, origin="test", level=1, number=19, name="relu_oom64",
                                  id="test/relu_oom64")
    options = fast_options.model_copy(update={"time": False, "run_timeout_s": 60})
    (r,) = evaluate_many([(problem, cpp_candidate("relu"), "cpp")], options, devices=["cpu"],
                         compile_workers=1)
    assert r.status == Status.ok, r.message
    assert jobs_run == [("correct", "candidate", False), ("correct", "candidate", True)]
    assert r.correctness.tolerance.policy == "kernelbench", r.correctness.tolerance
    assert any("run again with the device to itself" in w for w in r.warnings), r.warnings


def test_a_batch_times_each_problems_baselines_once_ahead_of_its_candidates(relu, fast_options,
                                                                          jobs_run):
    """The baselines are timed into the cache from the batch's start (while its candidates
    build), and the candidates' timings find them there: one eager timing for three candidates."""
    from feedback import cache
    from feedback.environment import host_environment, known_device

    options = fast_options.model_copy(update={"compile_baseline": False, "run_timeout_s": 60})
    device = known_device(host_environment("cpp", options.device))
    record = cache.reference_path(options, relu, "time", "eager", "cpp", device)
    record.unlink(missing_ok=True)
    items = [(relu, cpp_candidate("relu", extra=f"\n# copy {i}\n"), "cpp") for i in range(3)]
    results = evaluate_many(items, options, devices=["cpu"], compile_workers=2)
    assert all(r.status == Status.ok and r.speedup_eager is not None for r in results), \
        [r.message[:300] for r in results]
    timings = [(kind, role) for kind, role, _ in jobs_run if kind == "time"]
    assert timings.count(("time", "eager")) == 1 and timings.count(("time", "candidate")) == 3
    assert record.exists()


def test_a_problems_two_baselines_are_one_job_and_a_missing_one_is_timed_alone(relu, fast_options,
                                                                             jobs_run):
    """Eager and torch.compile are timed by one `baselines` job (one process, one hold of the
    device), each cached as its own record; when only one record is missing, its own job runs."""
    from feedback import cache
    from feedback.environment import host_environment, known_device

    options = fast_options.model_copy(update={"run_timeout_s": 60, "timing_trials": 10})
    device = known_device(host_environment("cpp", options.device))
    records = {role: cache.reference_path(options, relu, "time", role, "cpp", device)
               for role in ("eager", "compiled")}
    for record in records.values():
        record.unlink(missing_ok=True)
    items = [(relu, cpp_candidate("relu", extra=f"\n# baselines {i}\n"), "cpp") for i in range(2)]
    results = evaluate_many(items, options, devices=["cpu"], compile_workers=2)
    assert all(r.status == Status.ok and r.speedup_eager is not None and r.speedup_compile
               is not None for r in results), [(r.message[:300], r.warnings) for r in results]
    timings = [role for kind, role, _ in jobs_run if kind == "time"]
    assert sorted(timings) == ["baselines", "candidate", "candidate"]
    assert all(record.exists() for record in records.values())

    records["compiled"].unlink()
    jobs_run.clear()
    again = evaluate_many(items[:1], options, devices=["cpu"], compile_workers=1)
    assert again[0].status == Status.ok and again[0].speedup_compile is not None
    assert sorted(role for kind, role, _ in jobs_run if kind == "time") == ["candidate", "compiled"]
    assert records["compiled"].exists()


def test_a_baseline_timed_with_another_window_is_not_reused(relu, fast_options):
    """`flush_ahead` and `trusted_lead` change what a sample's window holds: the references'
    cached timings are keyed on them like on every other timing knob."""
    from feedback import cache

    for knob in ("flush_ahead", "trusted_lead"):
        paths = {cache.reference_path(fast_options.model_copy(update={knob: on}), relu, "time",
                                      "eager", "cuda", "NVIDIA H200") for on in (False, True)}
        assert len(paths) == 2 and None not in paths, knob


def test_a_baseline_is_keyed_on_what_its_size_means_not_only_its_name(relu, fast_options):
    """Two records of one problem whose size `bench` gives other constants (the timing bench's
    kernels do so) measure different inputs: their baselines must not share a cache entry (on
    the H200 the 0.1 ms ReLU's speedup was computed from the 0.05 ms size's eager time)."""
    from feedback import cache

    options = fast_options.model_copy(update={"size": "bench"})
    records = [relu.model_copy(update={"sizes": {**relu.sizes, "bench": {"BATCH": batch}}})
               for batch in (8, 16)]
    paths = {cache.reference_path(options, r, "time", "eager", "cuda", "NVIDIA H200")
             for r in records}
    assert len(paths) == 2 and None not in paths
    assert cache.reference_path(options, records[0], "time", "eager", "cuda", "NVIDIA H200") \
        in paths  # the same record, the same key
