"""A node of a Ray cluster lost in the middle of a batch (a local three-node cluster: a head with
no CPUs and two one-CPU nodes, cpp backend): the evaluations its stage worker was running or
would have run are retried on the other node, and every result comes back once, correct."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray
from candidates import cpp_candidate
from ray.cluster_utils import Cluster

from feedback.cache import code_hash
from feedback.ray_executor import RayEvaluator
from feedback.result import Status

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0,
                                                          "include_dashboard": False})
    workers = [nodes.add_node(num_cpus=1) for _ in range(2)]
    nodes.wait_for_nodes()
    ray.init(address=nodes.address)
    yield nodes, workers
    ray.shutdown()
    nodes.shutdown()


def test_a_lost_node_loses_no_evaluation(cluster, relu, fast_options):
    nodes, workers = cluster
    options = fast_options.model_copy(update={"time": False, "run_timeout_s": 60})
    codes = [cpp_candidate("relu", extra=f"\n# variant {i}\n") for i in range(3)]
    ev = RayEvaluator(actors=1)
    try:
        pool = ev.pool("cpp")
        (first,) = pool.workers()
        built = [ev.compile(relu, code, "cpp", options) for code in codes]
        assert [b.status for b in built] == [Status.ok] * 3, [b.message for b in built]
        (doomed,) = [n for n in workers if n.node_id == first.node_id]
        with ThreadPoolExecutor(len(codes)) as threads:
            futures = [threads.submit(ev.correct, relu, code, "cpp", options, b)
                       for code, b in zip(codes, built)]
            time.sleep(1.0)  # the first correctness job runs now (each takes ~2 s here)
            nodes.remove_node(doomed)  # its raylet and every worker on it, the actor's included
            results = [f.result(timeout=300) for f in futures]
        after = pool.workers()
    finally:
        ev.close()
    assert [r.status for r in results] == [Status.ok] * 3, [r.message[:300] for r in results]
    assert [r.code_hash for r in results] == [code_hash(c) for c in codes]
    assert all(r.correctness.trials_passed == r.correctness.trials for r in results)
    assert pool.retried >= 1 and pool.replaced >= 1, "the node loss did not hit a running call"
    assert len(after) == 1 and after[0].node_id != first.node_id  # the replacement: elsewhere
