"""The environment with KV state in the engines and the cache features in its observation."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.decision.features import (
    BASE_SERVER_FEATURES,
    CACHED_SHARE_FEATURE,
    SERVER_FEATURES,
)
from scalesched.env.scheduling_env import EnvConfig, SchedulingEnv
from scalesched.errors import InputError

SMALL = dict(cluster="hetero-16", workload="tool-heavy", workflows=6, load=0.8)


pytestmark = pytest.mark.usefixtures("tool_heavy_capacity")


def test_kv_policy_and_width_are_checked() -> None:
    with pytest.raises(InputError, match="kv_policy"):
        EnvConfig(kv_policy="fifo").check()
    with pytest.raises(InputError, match="server_dim"):
        EnvConfig(server_dim=19).check()


def test_observations_carry_the_cache_features_when_asked() -> None:
    env = SchedulingEnv(
        EnvConfig(residency="dynamic", **SMALL, kv_policy="lru", server_dim=SERVER_FEATURES)  # type: ignore[arg-type]
    )
    assert env.observation_space["servers"].shape == (16, SERVER_FEATURES)
    obs, _ = env.reset(seed=0)
    shares = []
    for _ in range(120):
        assert obs["servers"].shape == (16, SERVER_FEATURES)
        shares.append(float(obs["servers"][:, CACHED_SHARE_FEATURE].max()))
        # the cached server if any (what a cache-following policy would do), else the first
        share = obs["servers"][:, CACHED_SHARE_FEATURE] * obs["mask"]
        action = int(np.argmax(share)) if share.any() else int(np.flatnonzero(obs["mask"])[0])
        obs, _, done, trunc, _ = env.step(action)
        if done or trunc:
            obs, _ = env.reset()
    assert max(shares) > 0.5  # sessions' contexts are expected cached somewhere
    assert env._sim is not None and env._sim._kv is not None  # the engines keep KV state
    base = SchedulingEnv(EnvConfig(residency="dynamic", **SMALL))  # type: ignore[arg-type]
    assert base.reset(seed=0)[0]["servers"].shape == (16, BASE_SERVER_FEATURES)
