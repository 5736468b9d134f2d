"""Gymnasium environment over the simulator: one step = one task placement.

The observation is what a :class:`~scalesched.decision.features.Decision` carries (task
features, per-server features padded to ``max_servers``, the feasibility mask and the real
N), so a policy trained here runs unchanged as a scheduler in the simulator or the Ray
runtime.

Two kinds of episode, chosen by :class:`EnvConfig`:

* **Cold start** (the defaults): ``workflows`` arrive on an empty cluster and the episode
  ends (terminated) when the last one finishes. The reward is minus the workflow-seconds
  spent in the system since the previous decision, divided by the episode's workflow
  count, so the undiscounted return is exactly minus the mean workflow response time.
* **Steady state** (``warmup_max > 0``, ``truncate``, ``reward_scale``): a heuristic
  (``warmup_policy``) places every task of a seeded random number of warm-up workflows in
  ``[warmup_min, warmup_max]``, so the policy takes over a loaded cluster at the arrival
  of the first window workflow. The policy then places every task until ``workflows``
  more have arrived, and the episode is *truncated* (``truncated=True``) at the first
  decision after that: the system is not drained, and a learner should bootstrap the
  value of the final observation. The reward is minus the workflow-seconds accrued since
  the previous decision times ``reward_scale`` (Decima's time integral), so the window's
  return is minus its total accrued response time (times the constant) whatever the
  window's length. ``load_min``/``load_max`` draw each episode's load uniformly.

The world (``residency``): ``planned`` (the default, as of the commands and training
configs) runs each episode on a deployment the planner makes for its offered rate
(``scalesched.runs.world``): load x the planned world's capacity, the plan made for the load
rounded to ``PLAN_LOAD_STEP`` so that a few cached plans serve every drawn load;
``dynamic`` loads models on demand (the world every shipped policy was trained in).

A policy is trained as it will act (``EnvConfig.acting``, a trained policy's options): with
a ``margin`` the observation's mask is the bounded candidate set, so the network learns to
choose among the servers it will choose among, and with ``order=workflow`` its calls are
admitted as ``fcfs_workflow`` admits them. ``settings`` (one drawn per episode from its seed)
trains one run across clusters, workloads, arrivals and worlds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from scalesched.cache.kv import KV_MODES
from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Place
from scalesched.decision.cycle import drive
from scalesched.decision.features import BASE_SERVER_FEATURES, SERVER_DIMS, TASK_FEATURES, Decision
from scalesched.decision.scheduler import Scheduler
from scalesched.env.settings import EnvSetting, Setting
from scalesched.errors import InputError
from scalesched.nn.observation import OBSERVED_TOKENS, observation, observed, observed_lengths
from scalesched.policies.ordering import capped_workflow_order
from scalesched.policies.trained import ActingOptions
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.runs.world import RunWorld, check_residency, resolve_world
from scalesched.sim.compiled_loop import CompiledLoop, loop_unsupported
from scalesched.sim.engine import Simulation
from scalesched.sim.run import summarise

Observation = dict[str, np.ndarray]

PLAN_LOAD_STEP = 0.05
"""In the planned world an episode runs on the plan for its load rounded to this step
(``runs.world.plan_load``): loads 0.4-0.95 share 12 plans per cluster and workload."""

STEADY_REWARD_SCALE = 0.01
"""The reward scale of the steady-state configs: one unit of return per 100 workflow-seconds
(at hetero-16, load 0.7, a step accrues a few workflow-seconds, so rewards stay O(0.1))."""


@dataclass(frozen=True)
class EnvConfig:
    """One training or evaluation setting (defaults: the cold-start episodes)."""

    cluster: str = "hetero-16"
    """Cluster preset or YAML path."""
    workload: str = "agentic-mix"
    """Workload preset or WfFormat path."""
    workflows: int = 30
    """Workflows the policy is responsible for: those arriving after the warm-up."""
    load: float = 0.7
    """Arrival rate as a fraction of capacity (used when no load range is set)."""
    arrivals: str = "poisson"
    """Arrival process: poisson, bursty, azure-conv, azure-code or replay:PATH."""
    max_servers: int | None = None
    """Padding size of the server axis; default: the cluster's size."""
    load_min: float | None = None
    """With ``load_max``: each episode's load is drawn uniformly from the range (seeded)."""
    load_max: float | None = None
    """Upper end of the per-episode load range (None: every episode runs at ``load``)."""
    warmup_min: int = 0
    """Fewest warm-up workflows placed by ``warmup_policy`` before the policy takes over."""
    warmup_max: int = 0
    """Most warm-up workflows (the count is drawn per episode); 0: start on an empty cluster."""
    warmup_policy: str = "eft"
    """Heuristic (a ``get_policy`` name) that places the warm-up's tasks."""
    truncate: bool = False
    """Truncate the episode once the window's ``workflows`` have arrived instead of draining
    the system (then the final observation is a live state whose value should be
    bootstrapped)."""
    max_decisions: int | None = None
    """Truncate after this many policy decisions at the latest (None: no cap), for episodes
    of a bounded length whatever the load."""
    reward_scale: float | None = None
    """Reward = -(workflow-seconds since the previous step) x this; None: x 1/workflows (the
    cold-start return is then -mean response time). Steady-state configs use
    ``STEADY_REWARD_SCALE``."""
    kv_policy: str | None = None
    """KV state in the engines (``scalesched.cache.kv``: lru, ttl, agent-aware, nocache);
    None: memoryless engines, as before the cache model."""
    server_dim: int = BASE_SERVER_FEATURES
    """Server features per server in the observation: the first ``BASE_SERVER_FEATURES``
    (what every network had before the cache features, and the default), or all
    ``SERVER_FEATURES`` (with the cache features: ``PPOConfig.cache_features``)."""
    residency: str = "planned"
    """The world episodes run in: ``planned`` (a deployment planned for each episode's rate;
    module docstring) or ``dynamic`` (models loaded on demand)."""
    observed_tokens: str = "estimate"
    """The output length an LLM call is costed at in the observation
    (:data:`~scalesched.nn.observation.OBSERVED_TOKENS`): ``estimate`` or ``p90``, what the
    trained network reads when it acts."""
    acting: ActingOptions = ActingOptions()
    """How the policy's answers act, as a trained policy named with these options acts: a
    ``margin`` narrows the observation's mask (and the valid actions) to the bounded
    candidate set (:class:`~scalesched.policies.bounded.ScoreMargin`); ``order=workflow``
    admits each placed call in workflow order (``age_cap_s`` as ``fcfs_workflow``'s).
    ``greedy`` has no meaning here: the learner samples."""

    def check(self, source: str = "EnvConfig") -> None:
        """Raise InputError naming the first inconsistent field."""
        if self.workflows <= 0:
            raise InputError(source, "workflows", "must be a positive count")
        if (self.load_min is None) != (self.load_max is None):
            raise InputError(source, "load_min", "set both load_min and load_max, or neither")
        if self.load_min is not None and not 0 < self.load_min <= (self.load_max or 0):
            raise InputError(source, "load_min", "need 0 < load_min <= load_max")
        if not 0 <= self.warmup_min <= self.warmup_max:
            raise InputError(source, "warmup_min", "need 0 <= warmup_min <= warmup_max")
        if self.max_decisions is not None and self.max_decisions <= 0:
            raise InputError(source, "max_decisions", "must be a positive count")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise InputError(source, "reward_scale", "must be positive")
        if self.kv_policy is not None and self.kv_policy not in KV_MODES:
            raise InputError(source, "kv_policy", f"must be one of {', '.join(KV_MODES)}")
        if self.residency not in ("planned", "dynamic"):
            raise InputError(source, "residency", "must be planned or dynamic")
        if self.server_dim not in SERVER_DIMS:
            raise InputError(
                source, "server_dim", f"must be one of {', '.join(map(str, SERVER_DIMS))}"
            )
        if self.observed_tokens not in OBSERVED_TOKENS:
            known = ", ".join(OBSERVED_TOKENS)
            raise InputError(source, "observed_tokens", f"must be one of {known}")
        if self.acting.greedy:
            raise InputError(source, "acting.greedy", "a learner samples its actions")


def observation_space(max_servers: int, server_dim: int = BASE_SERVER_FEATURES) -> spaces.Dict:
    return spaces.Dict(
        {
            "task": spaces.Box(-np.inf, np.inf, (TASK_FEATURES,), np.float32),
            "servers": spaces.Box(-np.inf, np.inf, (max_servers, server_dim), np.float32),
            "mask": spaces.MultiBinary(max_servers),
            "n_servers": spaces.Box(1, max_servers, (1,), np.int64),
        }
    )


def encode(
    decision: Decision, max_servers: int, server_dim: int = BASE_SERVER_FEATURES
) -> Observation:
    """The observation of one decision, padded to ``max_servers`` servers (the feature
    module's one encoding, ``observation``)."""
    return observation(decision, max_servers, server_dim)


class SchedulingEnv(gym.Env[Observation, int]):
    """Place each ready task of a stream of agentic workflows on a server."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        config: EnvConfig | None = None,
        setting_source: Callable[[], tuple[int, EnvSetting]] | None = None,
        settings: Sequence[Setting] = (),
        **overrides: Any,
    ) -> None:
        cfg = config or EnvConfig()
        if overrides:
            cfg = EnvConfig(**{**cfg.__dict__, **overrides})
        cfg.check()
        if settings and setting_source is not None:
            raise ValueError("give settings or a setting source, not both")
        self.config = cfg
        self._mix_tables: dict[str, tuple[ClusterSpec, ClusterTables]] = {}
        self.settings = tuple(settings)
        """Settings each episode draws one of (seeded, uniformly; empty: the config's)."""
        self.spec_cluster, self.tables = self._cluster_tables(cfg.cluster)
        sizes = [self._cluster_tables(x.cluster)[1].n for x in self.settings] or [self.tables.n]
        self.max_servers = cfg.max_servers or max(sizes)
        self.observation_space = observation_space(  # type: ignore[assignment]
            self.max_servers, cfg.server_dim
        )
        self.action_space = spaces.Discrete(self.max_servers)  # type: ignore[assignment]
        self._sim: Simulation | None = None
        self._exec: Simulation | CompiledLoop | None = None
        """What the episode's decisions come from: the simulation's events run in C++
        (``sim.compiled_loop``) where the core covers the episode, else the simulation."""
        self._decision: Decision | None = None
        self._area = 0.0
        self._scale = 1.0
        self._warmup = 0
        self._start_s = 0.0
        self._start_area = 0.0
        self._cutoff_s = math.inf
        self._steps = 0
        self.setting_source = setting_source
        """EnvSched: where each episode's setting comes from (None: the config's)."""
        self.setting = -1
        """Index of the current episode's setting (-1 without a source or settings)."""
        self._lengths = observed_lengths(cfg.observed_tokens)
        self._candidates = cfg.acting.candidate_set()
        self._allowed: np.ndarray | None = None
        """The servers the pending decision may go to (the observation's mask)."""
        self._planned_tables: dict[tuple[str, str], ClusterTables] = {}
        self.world = RunWorld(cfg.residency)
        """The world of the current episode (its plan named in a planned one)."""

    @property
    def decision(self) -> Decision | None:
        """The decision the next ``step`` answers (None before ``reset`` and once the
        episode is over): its estimates let a heuristic act in the environment, as a
        baseline or in a benchmark of the environment alone."""
        return self._decision

    @property
    def now(self) -> float:
        """The simulation's clock (s; 0 before ``reset``)."""
        return self._sim.now if self._sim is not None else 0.0

    def _cluster_tables(self, cluster: str) -> tuple[ClusterSpec, ClusterTables]:
        """A cluster's spec and plain tables, built once per environment."""
        if cluster not in self._mix_tables:
            spec = get_cluster(cluster)
            self._mix_tables[cluster] = (spec, ClusterTables(spec))
        return self._mix_tables[cluster]

    def _apply_setting(self, rng: np.random.Generator) -> EnvConfig:
        """With settings: draw one and make it this episode's (cluster, workload, load,
        arrivals, world); with a setting source: take its next setting (cluster mix,
        workload, load, warm-up); else the config as it is."""
        cfg = self.config
        if self.settings:
            self.setting = int(rng.integers(len(self.settings)))
            drawn = self.settings[self.setting]
            self.spec_cluster, self.tables = self._cluster_tables(drawn.cluster)
            return replace(
                cfg,
                cluster=drawn.cluster,
                workload=drawn.workload,
                load=drawn.load,
                load_min=None,
                load_max=None,
                arrivals=drawn.arrivals,
                residency=drawn.residency or cfg.residency,
            )
        if self.setting_source is None:
            return cfg
        self.setting, setting = self.setting_source()
        key = f"envsched:{setting.mix}"
        if key not in self._mix_tables:
            spec = setting.cluster()
            self._mix_tables[key] = (spec, ClusterTables(spec))
        self.spec_cluster, self.tables = self._mix_tables[key]
        if self.tables.n > self.max_servers:
            raise InputError("EnvSched", "mix", f"{setting.mix} exceeds {self.max_servers} servers")
        w = setting.warmup_workflows
        return replace(
            cfg,
            workload=setting.workload,
            load=setting.load,
            load_min=None,
            load_max=None,
            warmup_min=w,
            warmup_max=w,
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        # Draw order: the episode seed first, so cold-start episodes are what they always were.
        episode_seed = int(rng.integers(2**31 - 1))
        cfg = self._apply_setting(rng)
        load = cfg.load
        if cfg.load_min is not None and cfg.load_max is not None:
            load = float(rng.uniform(cfg.load_min, cfg.load_max))
        warmup = int(rng.integers(cfg.warmup_min, cfg.warmup_max + 1)) if cfg.warmup_max else 0
        # A truncated window needs one arrival past its end: the cut happens at that arrival.
        stream = warmup + cfg.workflows + (1 if cfg.truncate else 0)
        rate, tables = self._episode_world(cfg, load)
        scenario = Scenario(
            workload=cfg.workload,
            workflows=stream,
            load=load,
            rate=rate,
            arrivals=cfg.arrivals,
            seed=episode_seed,
        )
        sim = Simulation(
            self.spec_cluster,
            build_jobs(self.tables, scenario),  # on the plain tables, as every run's jobs
            tables=tables,
            kv_policy=cfg.kv_policy,
        )
        self._sim = sim
        heuristic = self._warmup_heuristic(episode_seed) if warmup else None
        if self._candidates is not None:
            self._candidates.reset(episode_seed)
        if loop_unsupported(sim, heuristic) is None:
            self._exec = CompiledLoop(sim)
        else:
            self._exec = sim
        self._scale = cfg.reward_scale if cfg.reward_scale is not None else 1.0 / cfg.workflows
        self._warmup = warmup
        self._cutoff_s = sim.jobs[warmup + cfg.workflows].arrival if cfg.truncate else math.inf
        if heuristic is not None:
            until_s = sim.jobs[warmup].arrival
            if isinstance(self._exec, CompiledLoop):
                decision = self._exec.warm_up(heuristic, until_s)
            else:
                decision = drive(sim, heuristic, until=lambda: sim.now >= until_s)
        else:
            decision = self._exec.next_decision()
        assert decision is not None, "the policy has at least one task to place"
        self._decision = decision
        self._start_s, self._start_area = sim.now, sim.in_system_area
        self._area = sim.in_system_area
        self._steps = 0
        info = {
            "episode_seed": episode_seed,
            "load": load,
            "warmup_workflows": warmup,
            "setting": self.setting,
            **self.world.metrics(),
        }
        return self._observe(decision), info

    def _episode_world(self, cfg: EnvConfig, load: float) -> tuple[float | None, ClusterTables]:
        """The episode's offered rate (None: ``load`` of the dynamic world's capacity, as
        before) and the tables it runs on: the plain ones, or its plan's (cached per plan)."""
        if check_residency(cfg.residency) == "dynamic":
            self.world = RunWorld("dynamic")
            return None, self.tables
        rate, deployment, self.world = resolve_world(
            self.spec_cluster,
            cfg.workload,
            "planned",
            rate=None,
            load=load,
            plan_step=PLAN_LOAD_STEP,
        )
        if deployment is None:  # no plan here (a fallback, named in self.world.note)
            return rate, self.tables
        key = (self.spec_cluster.name, deployment.name)
        if key not in self._planned_tables:
            self._planned_tables[key] = ClusterTables(self.spec_cluster, deployment)
        return rate, self._planned_tables[key]

    def _warmup_heuristic(self, seed: int) -> Scheduler:
        """The heuristic that places the warm-up's decisions, seeded for the episode."""
        from scalesched.policies import get_policy

        heuristic = get_policy(self.config.warmup_policy)
        heuristic.reset(seed)
        return heuristic

    def step(self, action: int) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        sim, decision, executor = self._sim, self._decision, self._exec
        if sim is None or decision is None or executor is None:
            raise RuntimeError("step() before reset() or after the episode ended")
        info: dict[str, Any] = {}
        server, allowed = int(action), self._allowed
        assert allowed is not None
        if not (0 <= server < decision.n_servers and allowed[server]):
            # A masked action is replaced by a random allowed server, and reported.
            feasible = np.flatnonzero(allowed)
            server = int(feasible[self.np_random.integers(feasible.size)])
            info["invalid_action"] = True
        executor.apply(self._answer(decision, server))
        self._steps += 1
        nxt = executor.next_decision()
        reward = -(sim.in_system_area - self._area) * self._scale
        self._area = sim.in_system_area
        if nxt is None:
            self._decision = None
            info["episode_metrics"] = self._drained_metrics(sim)
            obs = self._observe(decision)  # terminal: the last observation again
            return obs, float(reward), True, False, info
        self._decision = nxt
        obs = self._observe(nxt)
        if sim.now >= self._cutoff_s or self._steps == self.config.max_decisions:
            self._decision = None
            info["episode_metrics"] = self._window_metrics(sim)
            return obs, float(reward), False, True, info
        return obs, float(reward), False, False, info

    def _observe(self, decision: Decision) -> Observation:
        """The observation of ``decision`` as the trained network will read it: re-costed
        at ``observed_tokens``, its mask the candidate set where ``acting`` has a margin
        (computed on the decision itself, as a bounded network's scheduler does)."""
        obs = encode(observed(decision, self._lengths), self.max_servers, self.config.server_dim)
        if self._candidates is None:
            self._allowed = np.asarray(decision.mask, dtype=bool)
        else:
            self._allowed = self._candidates.allowed(decision)
            obs["mask"][: decision.n_servers] = self._allowed
        return obs

    def _answer(self, decision: Decision, server: int) -> int | Place:
        """The placement, admitted in workflow order where ``acting`` says so."""
        acting = self.config.acting
        if acting.order != "workflow":
            return server
        cap = math.inf if acting.age_cap_s is None else acting.age_cap_s
        return Place(server, priority=capped_workflow_order(decision, cap))

    def _drained_metrics(self, sim: Simulation) -> dict[str, Any]:
        metrics: dict[str, Any] = dict(summarise(sim, policy="env", wall_s=0.0).metrics)
        window = sim.response_times[self._warmup :]
        metrics["window_response_time_s"] = float(np.nanmean(window))
        metrics["policy_decisions"] = self._steps
        return metrics

    def _window_metrics(self, sim: Simulation) -> dict[str, Any]:
        """What a truncated window measured. By Little's law, the accrued workflow-seconds
        per arrival is the mean response time at steady state."""
        area = sim.in_system_area - self._start_area
        span = sim.now - self._start_s
        arrivals = sum(1 for j in sim.jobs[self._warmup :] if j.arrival < sim.now)
        return {
            "window_response_time_s": area / arrivals if arrivals else math.nan,
            "window_arrivals": arrivals,
            "window_workflow_seconds": area,
            "window_s": span,
            "mean_in_system": area / span if span > 0 else 0.0,
            "policy_decisions": self._steps,
        }


def register() -> None:
    """Register ``scalesched/Scheduling-v0`` with Gymnasium (idempotent)."""
    if "scalesched/Scheduling-v0" not in gym.registry:
        gym.register(
            id="scalesched/Scheduling-v0",
            entry_point="scalesched.env.scheduling_env:SchedulingEnv",
        )
