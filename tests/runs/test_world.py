"""The world a run is in: a deployment planned for its rate, or dynamic residency."""

from __future__ import annotations

import pytest

from scalesched.cluster import get_cluster
from scalesched.errors import InputError
from scalesched.runs import world
from scalesched.runs.capacity import (
    PLANNED_METHOD,
    CapacityResult,
    cache_key,
    capacity_wps,
    store_result,
)
from scalesched.runs.capacity import (
    workflows_for as capacity_workflows,
)
from scalesched.runs.setup import Scenario, prepare, run

SPEC = get_cluster("hetero-8")


def _store_planned(value: float) -> None:
    key = cache_key(SPEC, "agentic-mix", method=PLANNED_METHOD)
    store_result(key, CapacityResult("hetero-8", "agentic-mix", value, "eft", {}, {}, value, 0, 0))
    world._capacity.pop(key, None)


def test_a_plan_is_made_once_per_rate_and_cached() -> None:
    first = world.plan_deployment(SPEC, "agentic-mix", 3.0)
    assert world.plan_deployment(SPEC, "agentic-mix", 3.0000001) is first  # 4 digits
    assert first.replicas and {r.model for r in first.replicas} >= {"llama-2-7b"}
    world._plans.clear()
    again = world.plan_deployment(SPEC, "agentic-mix", 3.0)  # from the file cache
    assert again.replicas == first.replicas and again.name == first.name


def test_the_planned_world_runs_on_its_plan_with_no_model_loads() -> None:
    _store_planned(10 * capacity_wps(SPEC, "agentic-mix"))
    setup = prepare(SPEC, Scenario(workflows=120, load=0.3, seed=3, residency="planned"))
    assert setup.world.name == "planned" and setup.deployment is not None
    assert setup.scenario.rate == pytest.approx(0.3 * 10 * capacity_wps(SPEC, "agentic-mix"))
    assert setup.load == 0.3  # the load asked survives its resolution to a rate
    m = run(setup, "tail").metrics
    assert m["model_loads"] == 0 and m["workflows_completed"] == 120
    dynamic = prepare(SPEC, Scenario(workflows=120, rate=setup.scenario.rate, seed=3))
    assert dynamic.world.name == "dynamic" and dynamic.deployment is None
    assert dynamic.load is None  # a rate was given
    assert [j.arrival for j in dynamic.jobs] == [j.arrival for j in setup.jobs]  # same jobs


def test_a_planned_world_that_sustains_less_falls_back_and_says_so() -> None:
    _store_planned(0.5 * capacity_wps(SPEC, "agentic-mix"))
    rate, deployment, w = world.resolve_world(SPEC, "agentic-mix", "planned", rate=None, load=0.7)
    assert (rate, deployment, w.name) == (None, None, "dynamic")
    assert "less than dynamic residency" in w.note


def test_the_search_finds_the_rate_whose_plan_delivers_most(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Plans for low rates hold little more than their rate; plans for rates past what the
    cluster takes are poor: the capacity is the peak in between, not a fixed point stuck
    on a poor plan."""

    def delivered(plan_for: float, offer: float) -> float:
        plan_capacity = 1.05 * plan_for if plan_for <= 10 else max(4.0, 20 - plan_for)
        return min(offer, plan_capacity)

    monkeypatch.setattr(world, "predicted_ceiling", lambda spec, wl: 40.0)
    monkeypatch.setattr(world, "capacity_wps", lambda spec, wl: 2.0, raising=False)
    monkeypatch.setattr("scalesched.runs.capacity.capacity_wps", lambda spec, wl: 2.0)
    monkeypatch.setattr(world, "plan_deployment", lambda spec, wl, rate: rate)
    monkeypatch.setattr(
        world,
        "_probe",
        lambda spec, wl, plan_for, policy, offer: (delivered(plan_for, offer), False),
    )
    result = world.measure_planned_capacity(SPEC, "agentic-mix")
    # Rates tried: 2, 2.3, ..., 9.3 (delivers 9.8), 10.7 (9.3), 12.3 (7.7): stop.
    best = 2 * world.RATE_STEP**11
    assert best < 10 < best * world.RATE_STEP
    assert result.capacity_wps == pytest.approx(1.05 * best, rel=1e-9)
    assert result.method == PLANNED_METHOD and result.nominal_wps == 40.0
    tried = [p["plan_for_wps"] for p in result.probes if p["policy"] == "eft"]
    assert len(tried) == 14 and tried[-1] > 12


def test_residency_is_checked() -> None:
    with pytest.raises(InputError, match="planned or dynamic"):
        world.check_residency("static")


def test_a_planned_probe_spans_enough_arrivals(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A probe shorter than a few mean responses under-counts its window's completions: the
    run grows with the offered rate so its arrivals span ``PROBE_SPAN_S``."""
    asked: list[int] = []

    def fake_probe(plain, planned, workload, policy, rate, workflows):  # type: ignore[no-untyped-def]
        asked.append(workflows)
        return rate, True

    monkeypatch.setattr("scalesched.runs.capacity.probe_throughput", fake_probe)
    deployment = world.plan_deployment(SPEC, "agentic-mix", 3.0)
    world._probe(SPEC, "agentic-mix", deployment, "eft", 20.0)
    world._probe(SPEC, "agentic-mix", deployment, "eft", 0.01)
    assert asked[0] >= 20.0 * world.PROBE_SPAN_S
    assert asked[1] == capacity_workflows(len(SPEC.servers))  # the floor of every probe


def test_a_plan_step_shares_one_plan_among_nearby_loads() -> None:
    assert world.plan_load(0.72, 0.05) == pytest.approx(0.7)
    assert world.plan_load(0.01, 0.05) == pytest.approx(0.05)  # never a plan for nothing
    assert world.plan_load(0.72, 0.0) == 0.72
    _store_planned(5.0)
    plans = {}
    for load in (0.69, 0.71, 0.74):
        rate, deployment, w = world.resolve_world(
            SPEC, "agentic-mix", "planned", rate=None, load=load, plan_step=0.05
        )
        assert rate == pytest.approx(load * 5.0)  # the load itself is offered
        assert deployment is not None and w.plan == deployment.name
        plans[load] = deployment.name
    assert plans[0.69] == plans[0.71] == world.plan_deployment(SPEC, "agentic-mix", 3.5).name
    assert plans[0.74] == world.plan_deployment(SPEC, "agentic-mix", 3.75).name != plans[0.71]


def test_a_plan_sized_to_a_mean_target_is_its_own_cached_plan():
    spec = get_cluster("hetero-8")
    fastest = world.plan_deployment(spec, "agentic-mix", 2.0)
    sized = world.plan_deployment(spec, "agentic-mix", 2.0, slo_mean_s=40.0)
    assert sized.name != fastest.name and "-slo40s-" in sized.name
    assert sized.gpus_used < fastest.gpus_used
    assert world.plan_deployment(spec, "agentic-mix", 2.0, slo_mean_s=40.0) is sized
    assert world.plan_deployment(spec, "agentic-mix", 2.0) is fastest
