"""Gymnasium environment over the simulator: one step = one task placement.

The observation is what a :class:`~scalesched.policies.features.Decision` carries (task
features, per-server features padded to ``max_servers``, the feasibility mask and the real
N), so a policy trained here runs unchanged as a scheduler in the simulator or the Ray
runtime. The reward is minus the workflow-seconds spent in the system since the previous
decision, divided by the episode's workflow count: the undiscounted return of an episode is
exactly minus its mean workflow response time, in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from scalesched.cluster import get_cluster
from scalesched.policies.features import SERVER_FEATURES, TASK_FEATURES, ClusterTables, Decision
from scalesched.sim.engine import Simulation
from scalesched.sim.run import summarise
from scalesched.sim.scenario import Scenario, build_jobs

Observation = dict[str, np.ndarray]


@dataclass(frozen=True)
class EnvConfig:
    """One training or evaluation setting."""

    cluster: str = "hetero-16"
    """Cluster preset or YAML path."""
    workload: str = "agentic-mix"
    """Workload preset or WfFormat path."""
    workflows: int = 30
    """Workflows per episode."""
    load: float = 0.7
    """Arrival rate as a fraction of nominal capacity."""
    arrivals: str = "poisson"
    """Arrival process: poisson, bursty or replay:PATH."""
    max_servers: int | None = None
    """Padding size of the server axis; default: the cluster's size."""


def observation_space(max_servers: int) -> spaces.Dict:
    return spaces.Dict(
        {
            "task": spaces.Box(-np.inf, np.inf, (TASK_FEATURES,), np.float32),
            "servers": spaces.Box(-np.inf, np.inf, (max_servers, SERVER_FEATURES), np.float32),
            "mask": spaces.MultiBinary(max_servers),
            "n_servers": spaces.Box(1, max_servers, (1,), np.int64),
        }
    )


def encode(decision: Decision, max_servers: int) -> Observation:
    """The observation of one decision, padded to ``max_servers`` servers."""
    n = decision.n_servers
    if n > max_servers:
        raise ValueError(f"cluster has {n} servers, more than max_servers={max_servers}")
    servers = np.zeros((max_servers, SERVER_FEATURES), dtype=np.float32)
    servers[:n] = decision.server_features
    mask = np.zeros(max_servers, dtype=np.int8)
    mask[:n] = decision.mask
    return {
        "task": decision.task_features.astype(np.float32),
        "servers": servers,
        "mask": mask,
        "n_servers": np.array([n], dtype=np.int64),
    }


class SchedulingEnv(gym.Env[Observation, int]):
    """Place each ready task of a stream of agentic workflows on a server."""

    metadata = {"render_modes": []}

    def __init__(self, config: EnvConfig | None = None, **overrides: Any) -> None:
        cfg = config or EnvConfig()
        if overrides:
            cfg = EnvConfig(**{**cfg.__dict__, **overrides})
        self.config = cfg
        self.spec_cluster = get_cluster(cfg.cluster)
        self.tables = ClusterTables(self.spec_cluster)
        self.max_servers = cfg.max_servers or self.tables.n
        self.observation_space = observation_space(self.max_servers)  # type: ignore[assignment]
        self.action_space = spaces.Discrete(self.max_servers)  # type: ignore[assignment]
        self._sim: Simulation | None = None
        self._decision: Decision | None = None
        self._area = 0.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        episode_seed = int(self.np_random.integers(2**31 - 1))
        scenario = Scenario(
            workload=self.config.workload,
            workflows=self.config.workflows,
            load=self.config.load,
            arrivals=self.config.arrivals,
            seed=episode_seed,
        )
        jobs = build_jobs(self.tables, scenario)
        self._sim = Simulation(self.spec_cluster, jobs, tables=self.tables)
        self._area = 0.0
        decision = self._sim.next_decision()
        assert decision is not None, "an episode has at least one task"
        self._decision = decision
        return encode(decision, self.max_servers), {"episode_seed": episode_seed}

    def step(self, action: int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        sim, decision = self._sim, self._decision
        if sim is None or decision is None:
            raise RuntimeError("step() before reset() or after the episode ended")
        info: dict[str, Any] = {}
        server = int(action)
        if not (0 <= server < decision.n_servers and decision.mask[server]):
            # A masked action is replaced by a random feasible server, and reported.
            feasible = np.flatnonzero(decision.mask)
            server = int(feasible[self.np_random.integers(feasible.size)])
            info["invalid_action"] = True
        sim.apply(server)
        nxt = sim.next_decision()
        reward = -(sim.in_system_area - self._area) / len(sim.jobs)
        self._area = sim.in_system_area
        if nxt is None:
            self._decision = None
            result = summarise(sim, policy="env", wall_s=0.0)
            info["episode_metrics"] = result.metrics
            obs = encode(decision, self.max_servers)  # terminal: the last observation again
            return obs, float(reward), True, False, info
        self._decision = nxt
        return encode(nxt, self.max_servers), float(reward), False, False, info


def register() -> None:
    """Register ``scalesched/Scheduling-v0`` with Gymnasium (idempotent)."""
    if "scalesched/Scheduling-v0" not in gym.registry:
        gym.register(
            id="scalesched/Scheduling-v0",
            entry_point="scalesched.env.scheduling_env:SchedulingEnv",
        )
