"""Steady-state episodes: warm-up by a heuristic, truncation, time-integral reward, loads."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from scalesched.env import EnvConfig, SchedulingEnv, encode
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation

STEADY = EnvConfig(
    residency="dynamic",
    cluster="hetero-4",
    workflows=4,
    warmup_min=3,
    warmup_max=8,
    truncate=True,
    reward_scale=0.01,
    load_min=0.5,
    load_max=0.9,
)


def eft_action(env: SchedulingEnv) -> int:
    decision = env._decision
    assert decision is not None
    return int(np.argmin(np.where(decision.mask, decision.finish_s, np.inf)))


def test_steady_env_passes_gymnasium_checker() -> None:
    check_env(SchedulingEnv(STEADY), skip_render_check=True)


def test_policy_takes_over_where_the_warmup_heuristic_leaves_off() -> None:
    env = SchedulingEnv(STEADY)
    obs, info = env.reset(seed=11)
    k = info["warmup_workflows"]
    assert STEADY.warmup_min <= k <= STEADY.warmup_max
    # Replay the same stream with eft placing everything before the k-th arrival.
    tables = env.tables
    scenario = Scenario(
        workflows=k + STEADY.workflows + 1, load=info["load"], seed=info["episode_seed"]
    )
    sim = Simulation(env.spec_cluster, build_jobs(tables, scenario), tables=tables)
    eft = get_policy("eft")
    decision = sim.next_decision()
    placed = 0
    while decision is not None and sim.now < sim.jobs[k].arrival:
        sim.apply(eft.select(decision))
        placed += 1
        decision = sim.next_decision()
    assert decision is not None and placed > 0
    assert sim.now >= sim.jobs[k].arrival
    expected = encode(decision, env.max_servers)
    for key in obs:
        np.testing.assert_array_equal(obs[key], expected[key])
    assert env._sim is not None and env._sim.decisions == placed


def test_same_seed_same_warmup_and_load_and_draws_vary() -> None:
    env = SchedulingEnv(STEADY)
    first = [env.reset(seed=s)[1] for s in range(12)]
    again = [SchedulingEnv(STEADY).reset(seed=s)[1] for s in range(12)]
    assert first == again
    loads = [i["load"] for i in first]
    warmups = [i["warmup_workflows"] for i in first]
    assert all(0.5 <= x <= 0.9 for x in loads) and len(set(loads)) == 12
    assert len(set(warmups)) > 1


def test_window_is_truncated_at_its_last_arrival_and_returns_its_accrued_time() -> None:
    env = SchedulingEnv(STEADY)
    _, info = env.reset(seed=4)
    sim = env._sim
    assert sim is not None
    k = info["warmup_workflows"]
    start_area, start_s = sim.in_system_area, sim.now
    total = 0.0
    while True:
        _, reward, terminated, truncated, step_info = env.step(eft_action(env))
        total += reward
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert sim.now == sim.jobs[k + STEADY.workflows].arrival
    assert sim.workflows_completed < len(sim.jobs)  # not drained
    metrics = step_info["episode_metrics"]
    area = sim.in_system_area - start_area
    assert metrics["window_workflow_seconds"] == pytest.approx(area)
    assert metrics["window_s"] == pytest.approx(sim.now - start_s)
    assert total == pytest.approx(-area * 0.01, rel=1e-9)  # STEADY.reward_scale
    assert metrics["window_arrivals"] == STEADY.workflows
    assert metrics["window_response_time_s"] == pytest.approx(area / STEADY.workflows)
    with pytest.raises(RuntimeError):
        env.step(0)


def test_max_decisions_caps_the_window() -> None:
    env = SchedulingEnv(
        EnvConfig(
            residency="dynamic", cluster="hetero-4", workflows=50, warmup_max=3, max_decisions=7
        )
    )
    for seed in range(3):
        env.reset(seed=seed)
        for step in range(1, 8):
            *_, terminated, truncated, info = env.step(eft_action(env))
            assert not terminated and truncated == (step == 7)
        metrics = info["episode_metrics"]
        assert metrics["policy_decisions"] == 7 and metrics["window_arrivals"] >= 1
        expected = metrics["window_workflow_seconds"] / metrics["window_arrivals"]
        assert metrics["window_response_time_s"] == pytest.approx(expected)


def test_warmup_without_truncation_drains_and_reports_the_window_mean() -> None:
    cfg = EnvConfig(
        residency="dynamic", cluster="hetero-4", workflows=3, warmup_min=2, warmup_max=2
    )
    env = SchedulingEnv(cfg)
    env.reset(seed=0)
    sim = env._sim
    assert sim is not None
    while True:
        *_, terminated, truncated, info = env.step(eft_action(env))
        if terminated or truncated:
            break
    assert terminated and not truncated
    rt = sim.response_times
    assert len(rt) == 5
    assert info["episode_metrics"]["window_response_time_s"] == pytest.approx(rt[2:].mean())


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"load_min": 0.5}, "load_min"),
        ({"load_min": 0.9, "load_max": 0.5}, "load_min"),
        ({"warmup_min": 5, "warmup_max": 2}, "warmup_min"),
        ({"reward_scale": 0.0}, "reward_scale"),
        ({"workflows": 0}, "workflows"),
        ({"max_decisions": 0}, "max_decisions"),
    ],
)
def test_inconsistent_config_names_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(InputError, match=field):
        SchedulingEnv(EnvConfig(residency="dynamic", cluster="hetero-4", **overrides))  # type: ignore[arg-type]
