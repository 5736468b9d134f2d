"""Episodes in the planned world: each runs on the deployment planned for its load (rounded
to PLAN_LOAD_STEP, so a few cached plans serve every drawn load), its jobs the same
arrivals at load x the planned world's capacity; the dynamic world is unchanged."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from scalesched import ENV_ID
from scalesched.cluster import get_cluster
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.env import EnvConfig, SchedulingEnv
from scalesched.errors import InputError
from scalesched.runs import world
from scalesched.runs.capacity import capacity_wps
from scalesched.runs.setup import Scenario, build_jobs

SPEC = get_cluster("hetero-8")
MODEL_NAMES = {i: name for name, i in MODEL_INDEX.items()}
PLANNED = EnvConfig(
    cluster="hetero-8", workflows=6, load_min=0.5, load_max=0.9, residency="planned"
)


def test_residency_is_checked() -> None:
    with pytest.raises(InputError, match="residency"):
        EnvConfig(residency="static").check()


def test_the_environment_runs_on_a_deployment_by_default() -> None:
    env = gym.make(ENV_ID, workflows=3)
    _, info = env.reset(seed=1)
    assert info["world"] == "planned" and info["deployment"].startswith("plan-hetero-16-")
    assert EnvConfig().residency == "planned"


def test_a_dynamic_episode_is_what_it_was() -> None:
    env = SchedulingEnv(EnvConfig(residency="dynamic", cluster="hetero-8", workflows=6))
    _, info = env.reset(seed=4)
    assert (info["world"], info["deployment"]) == ("dynamic", "")
    assert env._sim is not None and env._sim.tables is env.tables
    scenario = Scenario(workflows=6, load=0.7, seed=info["episode_seed"])
    expected = build_jobs(ClusterTables(SPEC), scenario)
    assert [j.arrival for j in env._sim.jobs] == [j.arrival for j in expected]


def test_planned_episodes_run_on_the_plan_for_their_load() -> None:
    env = SchedulingEnv(PLANNED)
    capacity = world.planned_capacity_wps(SPEC, "agentic-mix")
    assert capacity > capacity_wps(SPEC, "agentic-mix")  # hetero-8 does not fall back
    plans, checked = set(), 0
    for seed in range(12):
        _, info = env.reset(seed=seed)
        load = info["load"]
        assert info["world"] == "planned"
        plan = world.plan_deployment(SPEC, "agentic-mix", world.plan_load(load, 0.05) * capacity)
        assert info["deployment"] == plan.name
        plans.add(plan.name)
        sim = env._sim
        assert sim is not None
        expected = build_jobs(
            ClusterTables(SPEC),
            Scenario(workflows=6, rate=load * capacity, seed=info["episode_seed"]),
        )
        assert [j.arrival for j in sim.jobs] == [j.arrival for j in expected]
        placed = {(r.server, r.model) for r in plan.replicas}
        decision = env.decision
        while decision is not None:  # every LLM task goes only where its model is placed
            if decision.task.model >= 0:
                model = MODEL_NAMES[decision.task.model]
                allowed = {s.name for s in SPEC.servers if (s.name, model) in placed}
                feasible = {SPEC.servers[i].name for i in np.flatnonzero(decision.mask)}
                assert feasible <= allowed
                checked += 1
            env.step(int(np.flatnonzero(decision.mask)[0]))
            decision = env.decision
    assert checked > 50
    assert 1 < len(plans) <= 9  # loads 0.5-0.9 in steps of 0.05
    assert len(env._planned_tables) == len(plans)  # one set of tables per plan
