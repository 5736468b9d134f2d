"""``Simulation.fork``: a copy of a running simulation continues exactly as the original
would, and nothing done to a copy reaches the original.

Every scenario runs three ways on the same jobs: uninterrupted; forked half-way with both
the copy and the original carried on by copies of the same policy; and forked with the copy
driven by another policy to the end first. All must end with the same metrics, bit for bit.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.run import summarise
from scalesched.sim.scenario import Scenario, build_jobs, stream_jobs

WALL = ("sim_wall_time_s", "wall_s", "events_per_s", "decisions_per_s")

SCENARIOS: dict[str, dict[str, Any]] = {
    "eft": dict(policy="eft"),
    "hedge": dict(policy="hedge"),
    "heft_online-rank-order": dict(policy="heft_online"),
    "tail_scaleout-replicas": dict(policy="tail_scaleout", rate=2.4),
    "kv-lru-sessions": dict(policy="kv_aware", workload="agent-mix", kv_policy="lru", rate=1.2),
    "kv-agent-aware": dict(policy="eft", workload="agent-mix", kv_policy="agent-aware", rate=1.2),
    "logits-rides": dict(policy="eft", workload="test-time-scaling", logits_cache=True, rate=2.0),
    "tool-cache": dict(policy="eft", workload="tool-heavy", tool_cache=True, rate=1.0),
    "streamed": dict(policy="eft", stream=True),
}


def _sim(case: dict[str, Any]) -> Simulation:
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    scenario = Scenario(
        workload=case.get("workload", "agentic-mix"),
        workflows=60,
        rate=case.get("rate", 2.6),
        seed=11,
        tool_repeat=0.3 if case.get("tool_cache") else 0.0,
    )
    jobs = (stream_jobs if case.get("stream") else build_jobs)(tables, scenario)
    return Simulation(
        spec,
        jobs,
        tables=tables,
        ready_order=get_policy(case["policy"]).ready_order,
        kv_policy=case.get("kv_policy"),
        tool_cache=case.get("tool_cache", False),
        logits_cache=case.get("logits_cache"),
    )


def _metrics(sim: Simulation) -> dict[str, Any]:
    m = summarise(sim, policy="p", wall_s=0.0).metrics
    return {k: v for k, v in m.items() if k not in WALL}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_fork_continues_exactly_and_leaves_the_original_alone(name: str) -> None:
    case = SCENARIOS[name]
    whole = _sim(case)
    policy = get_policy(case["policy"])
    policy.reset(4)
    drive(whole, policy)
    expected = _metrics(whole)

    sim = _sim(case)
    policy = get_policy(case["policy"])
    policy.reset(4)
    pending = drive(sim, policy, until=lambda: sim.now >= 10.0)
    assert pending is not None and sim.in_system > 0, "the fork must happen mid-run"

    twin = sim.fork()
    twin_policy = copy.deepcopy(policy)
    twin.apply(twin_policy.select(pending))
    drive(twin, twin_policy)
    assert _metrics(twin) == expected

    other = sim.fork()  # driven elsewhere first: nothing of it may reach ``sim``
    stranger = get_policy("random")
    stranger.reset(1)
    other.apply(int(pending.mask.nonzero()[0][-1]))
    drive(other, stranger)
    assert other.done

    sim.apply(policy.select(pending))
    drive(sim, policy)
    assert _metrics(sim) == expected


def test_a_fork_shares_the_static_tables_and_jobs() -> None:
    sim = _sim(SCENARIOS["eft"])
    policy = get_policy("eft")
    drive(sim, policy, until=lambda: sim.now >= 10.0)
    twin = sim.fork()
    assert twin.tables is sim.tables and twin.jobs is sim.jobs
    assert twin.tasks.of is not sim.tasks.of and twin.tasks.of == sim.tasks.of
    assert twin._heap is not sim._heap and twin._heap == sim._heap
