"""The environment acts as a trained policy named with options acts: the bounded candidate
set as the observation's mask, workflow order on its placements, p90-costed observations,
and settings drawn per episode."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster.tables import ClusterTables
from scalesched.env import EnvConfig, SchedulingEnv
from scalesched.env.settings import Setting
from scalesched.errors import InputError
from scalesched.nn.observation import observation, observed, observed_lengths
from scalesched.policies import get_policy
from scalesched.policies.bounded import ScoreMargin
from scalesched.policies.trained import ActingOptions
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation

COLD = EnvConfig(residency="dynamic", cluster="hetero-4", workflows=30, load=1.5)
"""Past capacity, so calls queue in the engines and the admission order matters."""


def first_allowed_episode(env: SchedulingEnv, seed: int) -> tuple[np.ndarray, int]:
    """Each step on the lowest-indexed server the observation allows: the response times
    (in arrival order) and the episode seed."""
    obs, info = env.reset(seed=seed)
    while True:
        obs, _, terminated, truncated, _ = env.step(int(np.flatnonzero(obs["mask"])[0]))
        if terminated or truncated:
            assert env._sim is not None
            return np.asarray(env._sim.response_times), info["episode_seed"]


def heuristic_run(name: str, env: SchedulingEnv, episode_seed: int) -> np.ndarray:
    tables = ClusterTables(env.spec_cluster)
    jobs = build_jobs(tables, Scenario(workflows=COLD.workflows, load=COLD.load, seed=episode_seed))
    policy = get_policy(name)
    sim = Simulation(env.spec_cluster, jobs, tables=tables, ready_order=policy.ready_order)
    policy.reset(episode_seed)
    decision = sim.next_decision()
    while decision is not None:
        sim.apply(policy.select(decision))
        decision = sim.next_decision()
    return np.asarray(sim.response_times)


@pytest.mark.parametrize(("order", "heuristic"), [("own", "tail"), ("workflow", "fcfs_workflow")])
def test_margin_zero_in_an_order_is_that_heuristic(order: str, heuristic: str) -> None:
    """At margin 0 the candidates are tail's pick and its exact ties, so taking the first
    is tail's run; admitted in workflow order it is fcfs_workflow's."""
    env = SchedulingEnv(COLD, acting=ActingOptions(margin=0.0, order=order))  # type: ignore[arg-type]
    ours, episode_seed = first_allowed_episode(env, seed=4)
    np.testing.assert_array_equal(ours, heuristic_run(heuristic, env, episode_seed))


def test_orders_differ_where_calls_queue() -> None:
    """The test above can fail: the two orders give different runs on these jobs."""
    own = first_allowed_episode(SchedulingEnv(COLD, acting=ActingOptions(margin=0.0)), seed=4)
    workflow = first_allowed_episode(
        SchedulingEnv(COLD, acting=ActingOptions(margin=0.0, order="workflow")), seed=4
    )
    assert not np.array_equal(own[0], workflow[0])


def test_the_mask_is_the_candidate_set_and_other_actions_are_replaced() -> None:
    env = SchedulingEnv(COLD, acting=ActingOptions(margin=0.05, loads="free"))
    reference = ScoreMargin(0.05, "tail", "free")
    obs, _ = env.reset(seed=2)
    narrowed = replaced = 0
    for _ in range(300):
        decision = env.decision
        assert decision is not None
        allowed = reference.allowed(decision)
        np.testing.assert_array_equal(obs["mask"][: decision.n_servers].astype(bool), allowed)
        narrowed += int(allowed.sum() < decision.mask.sum())
        outside = np.flatnonzero(decision.mask & ~allowed)
        action = int(outside[0]) if outside.size else int(np.flatnonzero(allowed)[0])
        obs, _, terminated, truncated, info = env.step(action)
        replaced += bool(info.get("invalid_action"))
        if terminated or truncated:
            break
    assert narrowed > 0 and replaced == narrowed


def test_p90_observations_are_costed_at_the_predictors_length() -> None:
    env = SchedulingEnv(COLD, observed_tokens="p90")
    obs, _ = env.reset(seed=1)
    decision = env.decision
    assert decision is not None
    seen = observation(observed(decision, observed_lengths("p90")), env.max_servers, 18)
    for key in obs:
        np.testing.assert_array_equal(obs[key], seen[key])
    plain = observation(decision, env.max_servers, 18)
    assert decision.task.kind != "llm" or not np.array_equal(obs["task"], plain["task"])


def test_each_episode_draws_a_setting_from_its_seed() -> None:
    settings = [
        Setting("hetero-4", "agentic-mix", 0.5, residency="dynamic"),
        Setting("hetero-8", "tool-heavy", 0.9, arrivals="bursty", residency="dynamic"),
    ]
    env = SchedulingEnv(EnvConfig(workflows=3), settings=settings)
    assert env.max_servers == 8
    drawn = []
    for seed in range(8):
        obs, info = env.reset(seed=seed)
        assert obs["servers"].shape[0] == 8
        assert int(obs["n_servers"][0]) == (4, 8)[info["setting"]]
        assert info["world"] == "dynamic"
        drawn.append(info["setting"])
        again = SchedulingEnv(EnvConfig(workflows=3), settings=settings).reset(seed=seed)[1]
        assert again["setting"] == info["setting"]
    assert set(drawn) == {0, 1}


def test_inconsistent_acting_names_the_field() -> None:
    with pytest.raises(InputError, match="acting.greedy"):
        SchedulingEnv(COLD, acting=ActingOptions(greedy=True))
    with pytest.raises(InputError, match="observed_tokens"):
        SchedulingEnv(COLD, observed_tokens="p50")
