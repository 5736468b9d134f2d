"""The environment's episodes on the compiled core's event loop (``sim.compiled_loop``) are
the Python engine's: the same observations, rewards and episode metrics for the same
actions, with and without a warm-up, drained or truncated."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scalesched.decision.features import SERVER_FEATURES
from scalesched.env import EnvConfig, SchedulingEnv
from scalesched.sim import core
from scalesched.sim.compiled_loop import CompiledLoop

pytestmark = pytest.mark.skipif(
    not core.compiled_available(), reason="the compiled core is not built in this install"
)


def episode(config: EnvConfig, seed: int) -> tuple[list[Any], type]:
    """Every step's observation, reward and flags, and the final info, of one episode whose
    actions are drawn from a seeded generator (a masked one now and then)."""
    env = SchedulingEnv(config)
    obs, info = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    steps: list[Any] = [(obs, info)]
    while True:
        action = int(rng.integers(config.max_servers or env.tables.n))
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs, float(reward).hex(), terminated, truncated))
        if terminated or truncated:
            steps.append(info)
            return steps, type(env._exec)


def same(a: Any, b: Any) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            same(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, tuple | list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    elif isinstance(a, float) and a != a:
        assert b != b
    else:
        assert a == b


@pytest.mark.parametrize(
    "config",
    [
        EnvConfig(residency="dynamic", cluster="hetero-4", workflows=6),
        EnvConfig(
            residency="dynamic",
            cluster="hetero-8",
            workflows=5,
            warmup_min=3,
            warmup_max=6,
            truncate=True,
        ),
        EnvConfig(
            cluster="hetero-8",
            workflows=8,
            residency="planned",
            warmup_min=2,
            warmup_max=4,
            warmup_policy="tail",
        ),
        EnvConfig(
            residency="dynamic",
            cluster="hetero-8",
            workflows=4,
            warmup_min=2,
            warmup_max=3,
            warmup_policy="p2c",
        ),
        EnvConfig(  # the cache features read the router's memory, warm-up's placements too
            residency="dynamic",
            cluster="hetero-8",
            workload="agent-mix",
            workflows=6,
            warmup_min=4,
            warmup_max=6,
            server_dim=SERVER_FEATURES,
        ),
        EnvConfig(residency="dynamic", cluster="hetero-8", workflows=8, max_decisions=20, load=0.9),
        EnvConfig(  # KV reuse across calls, the engines' caches in C++
            residency="dynamic",
            cluster="hetero-8",
            workload="agent-mix",
            workflows=8,
            kv_policy="lru",
            server_dim=SERVER_FEATURES,
        ),
        EnvConfig(
            residency="dynamic",
            cluster="hetero-4",
            workload="coordinator",
            workflows=6,
            kv_policy="agent-aware",
            warmup_min=2,
            warmup_max=4,
            truncate=True,
        ),
    ],
)
def test_an_episode_is_the_python_engines(
    monkeypatch: pytest.MonkeyPatch, config: EnvConfig
) -> None:
    runs = {}
    for name in ("python", "compiled"):
        monkeypatch.setenv(core.CORE_ENV, name)
        runs[name] = episode(config, seed=11)
    assert runs["compiled"][1] is CompiledLoop
    assert runs["python"][1] is not CompiledLoop
    same(runs["python"][0], runs["compiled"][0])
