"""The capacity-aware bound over allocations: between the any-deployment bound and every
deployment's own capacity-aware bound on the same jobs, above the former where capacity
binds, its Lagrangian form below its whole program."""

from __future__ import annotations

import random

import pytest
from random_worlds import random_deployment, random_jobs

from scalesched.cluster import get_cluster
from scalesched.cluster.anywhere import any_deployment
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import replica_group_perf
from scalesched.cluster.tables import MODEL_NAMES, ClusterTables
from scalesched.eval.headroom.allocation import Allocations, allocation_bound
from scalesched.eval.headroom.bound import capacity_bound
from scalesched.eval.headroom.decompose import any_deployment_bound
from scalesched.workload.instance import Job

REL = 1e-6
"""Interior-point solves agree to about 1e-8 of the optimum's value."""


def _jobs(spec: ClusterSpec, seed: int, rate: float, n: int = 10) -> list[Job]:
    """``random_jobs`` of the models some server can run, arriving at ``rate``."""
    anywhere = any_deployment(spec)
    feasible = tuple(m for i, m in enumerate(MODEL_NAMES) if anywhere.configs[i])
    jobs = random_jobs(random.Random(seed), feasible, n=n)
    return [Job(j.workflow_id, j.workflow_id / rate, j.workflow) for j in jobs]


def _any_bound(spec: ClusterSpec, jobs: list[Job]) -> float:
    anywhere = any_deployment(spec)
    return sum(any_deployment_bound(anywhere, j) for j in jobs) / len(jobs)


def _worlds(spec: ClusterSpec, jobs: list[Job], seed: int, want: int = 3) -> list[float]:
    """The capacity-aware bounds of dynamic residency and of up to ``want`` random
    deployments that can serve the jobs at their rate (a bound exists)."""
    rng = random.Random(100 + seed)
    rate = 1.0 / (jobs[1].arrival - jobs[0].arrival)
    found = []
    for tables in [ClusterTables(spec)] + [
        ClusterTables(spec, random_deployment(rng, spec)) for _ in range(12)
    ]:
        used = {t.model for j in jobs for t in j.workflow.tasks if t.model}
        if not all(tables.feasible_any[MODEL_NAMES.index(m)] for m in used):
            continue
        got = capacity_bound(tables, jobs, rate).mean_s
        if got is not None:
            found.append(got)
        if len(found) > want:
            break
    return found


@pytest.mark.parametrize(
    ("cluster", "rate"),
    [("hetero-8", 0.5), ("homogeneous-3:l4-24g-x4", 0.1), ("homogeneous-2:h100-80g-x8", 0.3)],
)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_between_any_deployment_and_every_deployment(cluster: str, rate: float, seed: int) -> None:
    spec = get_cluster(cluster)
    jobs = _jobs(spec, seed, rate)
    worlds = _worlds(spec, jobs, seed)
    assert worlds, "no world to compare with: pick a lower rate"
    got = allocation_bound(ClusterTables(spec), jobs, rate)
    assert got.mean_s is not None, got.status
    assert got.mean_s >= _any_bound(spec, jobs) * (1 - REL)
    for world in worlds:
        assert got.mean_s <= world * (1 + REL)


def test_above_the_any_deployment_bound_where_capacity_binds() -> None:
    """hetero-8 at 10 workflows/s: more work than the fastest configurations absorb."""
    spec = get_cluster("hetero-8")
    jobs = _jobs(spec, 1, 10.0)
    got = allocation_bound(ClusterTables(spec), jobs, 10.0)
    assert got.mean_s is not None, got.status
    assert got.mean_s > 1.05 * _any_bound(spec, jobs)
    # and the load that cannot be absorbed at all has no bound
    assert allocation_bound(ClusterTables(spec), _jobs(spec, 1, 1000.0), 1000.0).mean_s is None


def test_the_lagrangian_form_is_below_the_whole_program() -> None:
    spec = get_cluster("hetero-8")
    jobs = _jobs(spec, 2, 5.0, n=40)
    tables = ClusterTables(spec)
    whole = allocation_bound(tables, jobs, 5.0, sample=0)
    priced = allocation_bound(tables, jobs, 5.0, sample=20)
    assert whole.mean_s is not None and priced.mean_s is not None
    assert priced.status.startswith("lagrangian (priced on 20 of 40")
    assert priced.mean_s <= whole.mean_s * (1 + REL)  # weak duality
    # a sample of half the window prices it closely (a smaller one can price it far
    # below: the split then keeps the any-deployment bound, the larger)
    assert priced.mean_s >= 0.99 * whole.mean_s


def test_a_group_steps_as_one_replica_at_its_share_of_the_batch() -> None:
    """``Family.points`` reads a group of ``c`` replicas' step at batch ``b`` as one
    replica's at ``ceil(b / c)``: the cost model's rule, checked on its objects."""
    for tp, share, count in [(1, 0.25, 16), (2, 0.5, 4), (4, 1.0, 1)]:
        group = replica_group_perf("llama-2-7b", "H100-80G", tp, share, count)
        one = replica_group_perf("llama-2-7b", "H100-80G", tp, share, 1)
        for b in (1, 2, 7, 16, 17, 255, 1000):
            assert group.decode_step_s(b, 0) == one.decode_step_s(-(-b // count), 0)


def test_one_class_per_model_and_server_shape_and_gpu_rows() -> None:
    spec = get_cluster("hetero-8")
    alloc = Allocations(ClusterTables(spec))
    shapes = {(s.gpu_type, s.gpus) for s in spec.servers if s.gpu_type and s.gpus > 0}
    assert len(alloc.pools) == len(shapes)
    keys = [(c.model, c.pool) for c in alloc.classes]
    assert len(keys) == len(set(keys))
    res = alloc.residency()
    total = sum(s.gpus for s in spec.servers if s.gpu_type)
    assert sum(gpus for _, _, gpus in res.gpu_rows) == total
    for cls in alloc.classes:
        assert cls.kv_cap <= cls.kv_per_gpu * max(f.gpus for f in cls.families)
        hull = cls.levels(1000, 1000)
        assert (hull[1:, 0] > hull[:-1, 0]).all() and (hull[1:, 1] <= hull[:-1, 1]).all()


def test_bad_arguments() -> None:
    tables = ClusterTables(get_cluster("hetero-8"))
    with pytest.raises(ValueError, match="sample must be >= 0"):
        allocation_bound(tables, [], 1.0, sample=-1)
    assert allocation_bound(tables, [], 1.0).mean_s is None
