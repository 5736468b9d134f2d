"""The heuristics, every one from the registry: feasible choices, same seed same numbers,
and the estimate fixes that make eft a fair baseline at steady state."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Defer, Hedge, Place, as_action
from scalesched.decision.features import make_decision
from scalesched.policies import HEURISTICS, STRONG_HEURISTICS, get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate
from scalesched.workload.patterns import PATTERNS

SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=40, rate=0.8, seed=11))


@pytest.mark.parametrize("name", sorted(HEURISTICS))
def test_every_heuristic_places_only_on_feasible_servers(name: str) -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = get_policy(name)
    policy.reset(0)
    decision = sim.next_decision()
    while decision is not None:
        choice = policy.select(decision)
        action = as_action(choice)
        if isinstance(action, Defer):  # allowed only while the engine may defer
            assert decision.can_defer, name
        else:
            assert isinstance(action, Place | Hedge), action
            servers = action.servers if isinstance(action, Hedge) else (action.server,)
            assert all(decision.mask[s] for s in servers)
        sim.apply(choice)
        decision = sim.next_decision()
    assert sim.done


@pytest.mark.parametrize("name", sorted(HEURISTICS))
def test_every_heuristic_same_seed_same_numbers(name: str) -> None:
    a = simulate(SPEC, JOBS, get_policy(name), seed=4, tables=TABLES).metrics
    b = simulate(SPEC, JOBS, get_policy(name), seed=4, tables=TABLES).metrics
    a.pop("sim_wall_time_s"), b.pop("sim_wall_time_s")
    assert a == b


def test_strong_heuristics_are_registered() -> None:
    assert set(STRONG_HEURISTICS) <= set(HEURISTICS)


def test_work_in_transfer_counts_on_its_server() -> None:
    """Two identical LLM tasks placed back to back: the second sees the first as queued on
    the server even though its inputs have not landed (it is in the batch already)."""
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = sim.next_decision()
    while decision is not None and decision.task.kind != "llm":
        sim.apply(int(np.argmax(decision.mask)))
        decision = sim.next_decision()
    assert decision is not None
    m = decision.task.model
    server = int(np.flatnonzero(decision.mask)[0])
    before = sim.engine_batch[server, m]
    sim.apply(server)
    assert sim.engine_batch[server, m] == before + 1


def test_imposed_delay_is_zero_on_an_idle_engine_and_grows_with_the_batch() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = sim.next_decision()
    while decision is not None and decision.task.kind != "llm":
        sim.apply(int(np.argmax(decision.mask)))
        decision = sim.next_decision()
    assert decision is not None
    assert np.all(decision.imposed_s[decision.mask] == 0)  # nobody running yet
    m = decision.task.model
    server = int(np.flatnonzero(decision.mask)[0])
    sim.engine_batch[server, m] += 5  # five requests running there
    sim.engine_ctx[server, m] += 5 * decision.task.context_tokens

    again = make_decision(TABLES, sim, decision.task)
    assert again.imposed_s[server] > 0


def test_p2c_depends_on_its_seed_only() -> None:
    a = simulate(SPEC, JOBS, get_policy("p2c"), seed=1, tables=TABLES).metrics
    b = simulate(SPEC, JOBS, get_policy("p2c"), seed=2, tables=TABLES).metrics
    c = simulate(SPEC, JOBS, get_policy("p2c"), seed=1, tables=TABLES).metrics
    assert a["avg_response_time_s"] == c["avg_response_time_s"]
    assert a["avg_response_time_s"] != b["avg_response_time_s"]


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("cluster", ["hetero-4", "homogeneous-2"])
@pytest.mark.parametrize("name", sorted(HEURISTICS))
def test_every_heuristic_on_every_pattern_and_preset(name: str, cluster: str, pattern: str) -> None:
    """The registries drive this grid: a new policy, preset or pattern is tested here."""
    spec = get_cluster(cluster)
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload=pattern, workflows=3, rate=0.2, seed=7))
    m = simulate(spec, jobs, get_policy(name), seed=7, tables=tables).metrics
    assert m["workflows_completed"] == 3
    assert m["tasks_completed"] == sum(len(j.workflow.tasks) for j in jobs)
