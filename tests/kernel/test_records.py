"""The world-independent lower bound (``any_deployment_lower_bound``): never above the
run's own contention-free bound in any world on the same jobs, equal to it where the
deployment already holds every fastest configuration."""

from __future__ import annotations

import random

import pytest
from random_worlds import random_deployment, random_jobs

from scalesched.cluster import get_cluster
from scalesched.cluster.anywhere import AnyDeployment, any_deployment
from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import ReplicaGroupPerf
from scalesched.cluster.spec import cluster_from_dict
from scalesched.cluster.tables import MODEL_NAMES, ClusterTables
from scalesched.kernel.records import any_deployment_lower_bound, lower_bound
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

REL = 1e-12
"""The two bounds compute the same floats in different orders: rounding only."""


CLUSTERS = ["hetero-8", "hetero-16", "homogeneous-4:h100-80g-x8", "homogeneous-3:l4-24g-x4"]


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_deployment_bound_is_at_most_every_worlds_bound(cluster: str, seed: int) -> None:
    rng = random.Random(seed)
    spec = get_cluster(cluster)
    anywhere = any_deployment(spec)
    feasible = tuple(m for i, m in enumerate(MODEL_NAMES) if anywhere.configs[i])
    jobs = random_jobs(rng, feasible)
    worlds = [ClusterTables(spec)] + [
        ClusterTables(spec, random_deployment(rng, spec)) for _ in range(3)
    ]
    for tables in worlds:
        for job in jobs:
            own = lower_bound(tables, job)
            assert any_deployment_lower_bound(anywhere, job) <= own * (1 + REL)


def _all_groups_cluster() -> tuple[ClusterSpec, Deployment, tuple[str, ...]]:
    """Identical 4 x H100 servers, one per replica group configuration of phi-2 and
    llama-2-7b that ``AnyDeployment`` keeps (whose dynamic engine, at tp 1, is a group of
    one replica, which the group of four beats): the deployment holds every fastest one."""
    models = ("phi-2", "llama-2-7b")
    probe = get_cluster("homogeneous-1:h100-80g-x4")
    anywhere = AnyDeployment(probe)
    groups = [
        c.engine
        for m in models
        for c in anywhere.configs[MODEL_NAMES.index(m)]
        if isinstance(c.engine, ReplicaGroupPerf)
    ]
    spec = cluster_from_dict(
        {"name": "all-groups", "servers": [{"type": "h100-80g-x4", "count": len(groups)}]},
        "test",
    )
    replicas = []
    for server, g in zip(spec.servers, groups, strict=True):
        for r in range(g.count):
            gpus = [(r * g.tp + i) % server.gpus for i in range(g.tp)]  # round robin
            replicas.append(
                {"model": g.model, "server": server.name, "gpus": gpus, "share": g.share}
            )
    return spec, deployment_from_dict({"name": "all", "replicas": replicas}, spec, "test"), models


def test_equal_where_the_deployment_holds_every_fastest_configuration() -> None:
    spec, deployment, models = _all_groups_cluster()
    tables = ClusterTables(spec, deployment)
    anywhere = AnyDeployment(spec)
    for job in random_jobs(random.Random(5), models, n=20):
        got, own = any_deployment_lower_bound(anywhere, job), lower_bound(tables, job)
        assert got == pytest.approx(own, rel=REL)


def test_it_is_below_the_dynamic_world_where_a_group_is_faster() -> None:
    """On 4 x H100 a group of four llama-2-7b replicas divides a lone call's attention by
    four (the simulator spreads contexts over a group's replicas); dynamic residency's one
    engine does not: a long call's world-independent bound is below the dynamic one's."""
    spec = get_cluster("homogeneous-1:h100-80g-x4")
    call = TaskInstance("c", "llm", model="llama-2-7b", prompt_tokens=4000, output_tokens=500)
    wf = WorkflowInstance("one", "test", (call,), ((),), ((),), {})
    job = Job(0, 0.0, wf)
    assert any_deployment_lower_bound(any_deployment(spec), job) < lower_bound(
        ClusterTables(spec), job
    )


def test_a_model_no_server_holds_has_an_infinite_bound() -> None:
    spec = get_cluster("homogeneous-1:l4-24g-x4")
    anywhere = any_deployment(spec)
    assert not anywhere.configs[MODEL_NAMES.index("llama-2-70b")]
    call = TaskInstance("c", "llm", model="llama-2-70b", prompt_tokens=10, output_tokens=10)
    job = Job(0, 0.0, WorkflowInstance("one", "test", (call,), ((),), ((),), {}))
    assert any_deployment_lower_bound(anywhere, job) == float("inf")


@pytest.mark.parametrize("residency", ["dynamic", "planned"])
def test_run_metrics_carry_both_bounds(residency: str) -> None:
    """``simulate --json``: the run's own bound and the world-independent one, over the
    same measured workflows."""
    from scalesched.runs.setup import Scenario, prepare, run

    scenario = Scenario(workflows=40, load=0.5, seed=0, residency=residency)
    result = run(prepare("hetero-16", scenario, stream=False), "tail")
    m = result.metrics
    assert 0 < float(m["mean_any_deployment_bound_s"]) <= float(m["mean_lower_bound_s"])
    ratio = float(m["avg_response_time_s"]) / float(m["mean_any_deployment_bound_s"])
    assert float(m["any_deployment_bound_ratio"]) == pytest.approx(ratio)
