"""Decision's public surface: the server features a learned policy reads can be replaced
for one decision, with their shape checked; the same decision at another output length is
what ``make_decision`` builds for it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import (
    CACHED_SHARE_FEATURE,
    SERVER_FEATURES,
    Decision,
    make_decision,
)
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation


def _first_decision() -> Decision:
    spec = get_cluster("hetero-4")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="agentic-mix", workflows=2, rate=1.0, seed=0))
    d = Simulation(spec, jobs, tables=tables).next_decision()
    assert d is not None
    return d


def test_replaced_server_features_are_what_the_decision_shows() -> None:
    d = _first_decision()
    built = d.server_features.copy()
    ablated = built.copy()
    ablated[:, CACHED_SHARE_FEATURE:] = 0.0
    d.server_features = ablated
    assert d.server_features is ablated
    assert np.array_equal(
        d.server_features[:, :CACHED_SHARE_FEATURE], built[:, :CACHED_SHARE_FEATURE]
    )


def test_replaced_server_features_must_keep_the_shape() -> None:
    d = _first_decision()
    with pytest.raises(ValueError, match=f"\\({d.n_servers}, {SERVER_FEATURES}\\)"):
        d.server_features = np.zeros((d.n_servers, SERVER_FEATURES - 1))


ARRAYS = ("transfer_s", "wait_s", "load_s", "exec_s", "finish_s", "imposed_s", "mask")


def test_a_decision_at_another_output_length_is_the_one_built_for_it() -> None:
    spec = get_cluster("hetero-4")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="agentic-mix", workflows=30, rate=2.0, seed=1))
    sim, eft = Simulation(spec, jobs, tables=tables), get_policy("eft")
    compared_with_parents = 0
    while (d := sim.next_decision()) is not None:
        if d.task.kind == "llm":
            tokens = 3 * d.task.output_tokens_est + 7
            again = d.at_output_tokens(tokens)
            built = make_decision(
                tables, sim, dataclasses.replace(d.task, output_tokens_est=tokens)
            )
            assert again.task == built.task
            for name in ARRAYS:
                assert np.array_equal(getattr(again, name), getattr(built, name)), name
            assert not np.array_equal(again.exec_s[d.mask], d.exec_s[d.mask])
            compared_with_parents += bool(d.task.parent_servers)
        sim.apply(eft.select(d))
    assert compared_with_parents >= 10  # the shared transfer times were not all zeros


def test_an_engine_past_its_ready_time_is_estimated_a_whole_load_again() -> None:
    """A simulated load ends exactly at ``engine_ready_at``; an engine still LOADING past it
    is queued for its server's GPUs, so its wait is the whole load plus the server's mean
    remaining work per task (the guess made when it queued), never 0."""
    from scalesched.decision.features import ENGINE_LOADING

    spec = get_cluster("hetero-4")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="agentic-mix", workflows=20, rate=2.0, seed=2))
    sim, eft = Simulation(spec, jobs, tables=tables, core="python"), get_policy("eft")
    while (d := sim.next_decision()) is not None and not (d.task.kind == "llm" and sim.now > 10):
        sim.apply(eft.select(d))
    assert d is not None
    m, (queued, loading) = d.task.model, np.flatnonzero(d.mask)[:2]
    sim.engine_state[[queued, loading], m] = ENGINE_LOADING
    sim.engine_ready_at[queued, m] = sim.now - 5.0
    sim.engine_ready_at[loading, m] = sim.now + 7.0
    sim.est_work[queued], sim.n_assigned[queued] = 30.0, 3
    built = make_decision(tables, sim, d.task)
    assert built.load_s[queued] == tables.load_s[queued, m] + 10.0
    assert built.load_s[loading] == 7.0
