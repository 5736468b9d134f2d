from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import scalesched.env  # noqa: F401  (registers scalesched/Scheduling-v0)
from scalesched.env import EnvConfig, SchedulingEnv

SMALL = EnvConfig(residency="dynamic", cluster="hetero-4", workflows=3)


def test_env_passes_gymnasium_checker() -> None:
    check_env(SchedulingEnv(SMALL), skip_render_check=True)


def test_registered_id_makes_the_env() -> None:
    env = gym.make("scalesched/Scheduling-v0", config=SMALL)
    obs, _ = env.reset(seed=0)
    assert obs["servers"].shape == (4, env.observation_space["servers"].shape[1])


def greedy_eft_episode(env: SchedulingEnv, seed: int) -> tuple[float, dict[str, float]]:
    """Run one episode choosing eft's server from the same decision the env holds."""
    obs, _ = env.reset(seed=seed)
    total = 0.0
    while True:
        decision = env.decision
        assert decision is not None
        action = int(np.argmin(np.where(decision.mask, decision.finish_s, np.inf)))
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            return total, info["episode_metrics"]


def test_the_pending_decision_is_public_while_an_episode_runs() -> None:
    env = SchedulingEnv(SMALL)
    assert env.decision is None
    env.reset(seed=1)
    decision = env.decision
    assert decision is not None and decision.mask.shape == (4,)
    while decision is not None:
        *_, terminated, truncated, _ = env.step(int(np.flatnonzero(decision.mask)[0]))
        decision = env.decision
        assert (decision is None) == (terminated or truncated)


def test_episode_return_is_minus_mean_response_time() -> None:
    env = SchedulingEnv(EnvConfig(residency="dynamic", cluster="hetero-8", workflows=12))
    total, metrics = greedy_eft_episode(env, seed=3)
    assert total == pytest.approx(-metrics["avg_response_time_s"], rel=1e-9)
    assert metrics["workflows_completed"] == 12


def test_same_seed_same_episode() -> None:
    a = greedy_eft_episode(SchedulingEnv(SMALL), seed=5)
    b = greedy_eft_episode(SchedulingEnv(SMALL), seed=5)
    assert a[0] == b[0]


def test_masked_action_is_replaced_and_reported() -> None:
    env = SchedulingEnv(EnvConfig(residency="dynamic", cluster="hetero-4", workflows=4))
    obs, _ = env.reset(seed=0)
    for _ in range(200):
        mask = obs["mask"].astype(bool)
        if not mask.all():
            bad = int(np.flatnonzero(~mask)[0])
            obs, _, done, _, info = env.step(bad)
            assert info.get("invalid_action") is True
            return
        obs, _, done, _, _ = env.step(int(np.flatnonzero(mask)[0]))
        if done:
            obs, _ = env.reset()
    pytest.fail("no masked server met in 200 steps")


def test_lockstep_envs_with_different_cluster_sizes_pad_and_mask() -> None:
    envs = gym.vector.SyncVectorEnv(
        [
            # Presets with a shipped capacity, so no test run measures one.
            lambda: SchedulingEnv(
                EnvConfig(residency="dynamic", cluster="hetero-4", workflows=3, max_servers=8)
            ),
            lambda: SchedulingEnv(
                EnvConfig(residency="dynamic", cluster="hetero-8", workflows=3, max_servers=8)
            ),
        ],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    obs, _ = envs.reset(seed=0)
    assert obs["servers"].shape[:2] == (2, 8)
    assert obs["n_servers"].reshape(-1).tolist() == [4, 8]
    assert not obs["mask"][0, 4:].any()
    assert not obs["servers"][0, 4:].any()
    for _ in range(30):
        actions = [int(np.flatnonzero(m)[0]) for m in obs["mask"]]
        obs, *_ = envs.step(np.array(actions))
    envs.close()
