"""The one setup helper: the same jobs and the same figures as the chain it replaces."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.runs.capacity import capacity_wps
from scalesched.runs.setup import Scenario, build_jobs, prepare, run
from scalesched.sim import scenario as sim_scenario
from scalesched.sim.run import simulate

SPEC = get_cluster("hetero-4")
TABLES = ClusterTables(SPEC)


def test_load_is_resolved_from_the_measured_capacity() -> None:
    scenario = Scenario(workflows=30, load=0.6, seed=3)
    ours = build_jobs(TABLES, scenario)
    by_hand = sim_scenario.build_jobs(
        TABLES, scenario, capacity_wps=capacity_wps(SPEC, scenario.workload)
    )
    assert [j.arrival for j in ours] == [j.arrival for j in by_hand]
    rate = len(ours) / ours[-1].arrival
    assert 0.3 < rate / (0.6 * capacity_wps(SPEC, "agentic-mix")) < 3


def test_the_simulator_does_not_measure_capacity_itself() -> None:
    with pytest.raises(ValueError, match="capacity"):
        sim_scenario.build_jobs(TABLES, Scenario(workflows=5, load=0.5))


def test_run_gives_the_figures_of_the_explicit_chain() -> None:
    scenario = Scenario(workflows=40, load=0.7, seed=2)
    setup = prepare("hetero-4", scenario)
    ours = run(setup, "eft", warmup=4, cooldown=2).metrics
    jobs = build_jobs(TABLES, scenario)
    theirs = simulate(
        SPEC, jobs, get_policy("eft"), seed=2, tables=TABLES, warmup=4, cooldown=2
    ).metrics
    ours.pop("sim_wall_time_s")
    theirs.pop("sim_wall_time_s")
    assert ours == theirs


def test_default_window_is_found_and_keeps_the_run_out() -> None:
    setup = prepare(TABLES, Scenario(workflows=200, rate=0.5, seed=1))
    m = run(setup, get_policy("least_loaded")).metrics
    assert m["warmup_method"] == "mser" and m["cooldown_workflows"] == 20
    assert m["warmup_workflows"] % 5 == 0 and m["warmup_workflows"] < 90
    fixed = run(setup, get_policy("least_loaded"), warmup=40).metrics
    assert (fixed["warmup_method"], fixed["warmup_workflows"]) == ("fixed", 40)


def test_a_deployment_changes_the_tables_not_the_jobs(tmp_path: Path) -> None:
    path = tmp_path / "d.yaml"
    replica = {"model": "llama-2-7b", "server": SPEC.servers[0].name, "gpus": [0], "share": 1}
    path.write_text(yaml.safe_dump({"name": "t", "replicas": [replica]}))
    scenario = Scenario(workflows=10, rate=0.5, seed=4)
    plain, pinned = prepare(SPEC, scenario), prepare(SPEC, scenario, deployment=path)
    assert [j.arrival for j in plain.jobs] == [j.arrival for j in pinned.jobs]
    assert not plain.tables.pinned and pinned.tables.pinned
    assert pinned.deployment is not None and len(pinned.deployment.replicas) == 1
    assert pinned.tables.feasible.sum() == 1
