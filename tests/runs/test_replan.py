"""Periodic re-planning (``runs.replan``): options checked with one-line errors, rates put
on the grid, new plans aligned to the running one, and a ``Replanner`` that sends a
``Redeploy`` exactly when the rate it measures asks for another plan."""

from __future__ import annotations

import math

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.redeploy import deployment_diff
from scalesched.errors import InputError
from scalesched.policies.eft import EftScheduler
from scalesched.runs.replan import Replanner, ReplanOptions, align
from scalesched.sim.run import simulate
from scalesched.workload.instance import Job

SPEC = get_cluster("hetero-8")


def deployment(*replicas: tuple[str, str, tuple[int, ...]]) -> Deployment:
    data = {
        "name": "t",
        "replicas": [{"model": m, "server": s, "gpus": list(g)} for m, s, g in replicas],
    }
    return deployment_from_dict(data, SPEC, "test")


SMALL = deployment(
    ("phi-2", "h100-80g-x4-0", (3,)),
    ("llama-2-7b", "h100-80g-x4-0", (0,)),
    ("codellama-34b", "a100-80g-x4-0", (0, 1)),
    ("llama-2-70b", "h100-80g-x4-1", (0, 1, 2, 3)),
)
LARGE = deployment(
    ("phi-2", "h100-80g-x4-0", (3,)),
    ("llama-2-7b", "h100-80g-x4-0", (0,)),
    ("llama-2-7b", "h100-80g-x4-0", (1,)),
    ("codellama-34b", "a100-80g-x4-0", (0, 1)),
    ("codellama-34b", "a100-80g-x4-1", (0, 1)),
    ("llama-2-70b", "h100-80g-x4-1", (0, 1, 2, 3)),
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("period_s", 0.0),
        ("period_s", math.nan),
        ("window_s", -1.0),
        ("hold_s", -5.0),
        ("headroom", math.inf),
        ("rate_step", 1.0),
        ("min_rate", 0.0),
    ],
)
def test_bad_options_name_the_field(field, value):
    with pytest.raises(InputError) as err:
        ReplanOptions(**{field: value})
    assert err.value.field == field and "\n" not in str(err.value)


def test_grid_rate_is_the_least_grid_point_at_or_above_the_rate():
    options = ReplanOptions(min_rate=0.5, rate_step=2.0, headroom=1.0)
    assert options.grid_rate(0.0) == 0.5
    assert options.grid_rate(0.5) == 0.5
    assert options.grid_rate(0.6) == 1.0
    assert options.grid_rate(2.0) == 2.0
    assert options.grid_rate(2.1) == 4.0
    assert ReplanOptions(min_rate=0.5, rate_step=2.0, headroom=2.0).grid_rate(1.5) == 4.0


def test_align_keeps_replicas_on_interchangeable_servers():
    """The same plan with its two A100 servers swapped: aligned, it moves nothing."""
    swapped = deployment(
        ("phi-2", "h100-80g-x4-0", (3,)),
        ("llama-2-7b", "h100-80g-x4-0", (0,)),
        ("codellama-34b", "a100-80g-x4-1", (0, 1)),
        ("llama-2-70b", "h100-80g-x4-1", (0, 1, 2, 3)),
    )
    raw = deployment_diff(ClusterTables(SPEC, SMALL), ClusterTables(SPEC, swapped))
    assert raw.loads and raw.unloads
    aligned = align(swapped, SMALL, SPEC)
    assert deployment_diff(ClusterTables(SPEC, SMALL), ClusterTables(SPEC, aligned)).empty
    # H100 servers are not interchangeable with A100 ones: nothing moves across types
    assert {r.server for r in aligned.replicas} == {r.server for r in SMALL.replicas}


def test_replanner_redeploys_exactly_when_the_rate_asks_for_another_plan():
    """Arrivals at 1/s for 20 s, then 4/s: plans for rates above 2 are LARGE. The first
    look after the rate rose sends one Redeploy, of exactly the SMALL -> LARGE diff."""
    times = [float(i) for i in range(20)] + [20 + 0.25 * i for i in range(120)]
    from scalesched.runs.setup import Scenario, build_jobs

    base = build_jobs(ClusterTables(SPEC), Scenario(workflows=len(times), rate=1.0, seed=5))
    jobs = [Job(j.workflow_id, t, j.workflow) for j, t in zip(base, times, strict=True)]
    asked: list[float] = []

    def plan_for(rate: float) -> Deployment:
        asked.append(rate)
        return LARGE if rate > 2 else SMALL

    options = ReplanOptions(period_s=5.0, window_s=5.0, min_rate=1.0, rate_step=2.0, hold_s=1000.0)
    policy = Replanner(EftScheduler(), plan_for, SMALL, 1.0, options)
    res = simulate(SPEC, jobs, policy, seed=5, tables=ClusterTables(SPEC, SMALL))
    m = res.metrics
    diff = deployment_diff(ClusterTables(SPEC, SMALL), ClusterTables(SPEC, LARGE))
    assert m["workflows_completed"] == len(times)
    assert m["redeploys"] == 1 == len(policy.history)
    assert (m["redeploy_loads"], m["redeploy_unloads"]) == (len(diff.loads), len(diff.unloads))
    assert m["redeploy_resizes"] == len(diff.resizes)
    when, measured, rate = policy.history[0]
    assert 20 < when <= 30 and measured > 2 and rate == 4.0
    assert all(r in (1.0, 2.0, 4.0, 8.0) for r in asked)


def test_a_replanner_whose_plan_never_changes_leaves_the_run_as_it_was():
    from scalesched.runs.setup import Scenario, build_jobs

    jobs = build_jobs(ClusterTables(SPEC), Scenario(workflows=60, rate=2.0, seed=9))
    tables = ClusterTables(SPEC, SMALL)
    plain = simulate(SPEC, jobs, EftScheduler(), seed=9, tables=tables)
    options = ReplanOptions(period_s=3.0)
    wrapped = Replanner(EftScheduler(), lambda rate: SMALL, SMALL, 2.0, options)
    res = simulate(SPEC, jobs, wrapped, seed=9, tables=ClusterTables(SPEC, SMALL))
    assert "redeploys" not in res.metrics
    assert res.response_times.tolist() == plain.response_times.tolist()


@pytest.mark.parametrize(("hold_s", "moves_in_lull"), [(0.0, 1), (30.0, 0)])
def test_the_scale_down_hold_keeps_the_plan_through_a_short_lull(hold_s, moves_in_lull):
    """4/s for 20 s, nothing for 15 s, 4/s again: without a hold the lull shrinks the plan
    (and the burst after it grows it back); with a 30-s hold nothing moves in the lull."""
    times = [0.25 * i for i in range(80)] + [35 + 0.25 * i for i in range(80)]
    from scalesched.runs.setup import Scenario, build_jobs

    base = build_jobs(ClusterTables(SPEC), Scenario(workflows=len(times), rate=1.0, seed=6))
    jobs = [Job(j.workflow_id, t, j.workflow) for j, t in zip(base, times, strict=True)]
    options = ReplanOptions(period_s=5.0, window_s=5.0, min_rate=1.0, rate_step=2.0, hold_s=hold_s)
    policy = Replanner(EftScheduler(), lambda r: LARGE if r > 2 else SMALL, LARGE, 4.0, options)
    simulate(SPEC, jobs, policy, seed=6, tables=ClusterTables(SPEC, LARGE))
    in_lull = [h for h in policy.history if 20 < h[0] <= 35]
    assert len(in_lull) == moves_in_lull
