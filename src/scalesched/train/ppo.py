"""PPO for placement policies, in one readable file (after CleanRL's ``ppo.py``).

Written here rather than taken from a library: torchrl's compiled extension does not load
with torch 2.13.0 on our machines, and Stable-Baselines3 has no pointer action over a
variable-size set of servers with a per-step mask. What is here: K environments stepped in
lockstep with one batched forward pass per step, GAE, the clipped objective, value
clipping, an entropy bonus, normalised advantages, minibatches, gradient-norm clipping, a
linear learning-rate schedule, target-KL early stop, SRR on the attention feature, an
input-dependent baseline (``input_baseline``: environments replaying one window compared
at equal simulated time, in place of GAE), fine-tuning from shipped weights (``init``), and
explicit seeding of numpy, torch and every environment.
"""

from __future__ import annotations

import csv
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from pydantic import ConfigDict
from torch import nn

from scalesched.decision.features import BASE_SERVER_FEATURES, SERVER_FEATURES, TASK_FEATURES
from scalesched.env.scheduling_env import EnvConfig, SchedulingEnv
from scalesched.env.settings import Setting
from scalesched.errors import InputError
from scalesched.nn import PolicyNetwork, build_network
from scalesched.nn.checkpoint import load_checkpoint, save_checkpoint
from scalesched.nn.common import obs_to_tensors
from scalesched.nn.scale_net import CRITIC_ENCODERS
from scalesched.nn.srr import SrrConfig, feature_stats, srr_losses
from scalesched.policies.trained import ActingOptions
from scalesched.train import config_file
from scalesched.train.config_file import read_mapping, validated
from scalesched.train.envsched import (
    EnvSchedSampler,
    SettingQueue,
    UniformSampler,
    default_settings,
)


@dataclass
class PPOConfig:
    """Everything a training run depends on; a YAML file sets any subset of these fields."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    name: str = "scale"
    """Name recorded in checkpoints and shown by the evaluation."""
    seed: int = 0
    """Seeds numpy, torch, Python's random and every environment."""
    total_steps: int = 600_000
    """Environment steps (task placements) over all environments."""
    # environment
    cluster: str = "hetero-16"
    """Training cluster (preset or YAML path)."""
    workload: str = "agentic-mix"
    """Training workload (preset or WfFormat path)."""
    workflows: int = 30
    """Workflows per episode."""
    load: float = 0.7
    """Arrival rate as a fraction of capacity (when no load range is set)."""
    load_min: float | None = None
    """With ``load_max``: each episode draws its load uniformly from [load_min, load_max]."""
    load_max: float | None = None
    """Upper end of the per-episode load range (None: every episode at ``load``)."""
    warmup_min: int = 0
    """Fewest warm-up workflows a heuristic places before the policy takes over (seeded)."""
    warmup_max: int = 0
    """Most warm-up workflows per episode; 0: episodes start on an empty cluster."""
    warmup_policy: str = "eft"
    """The heuristic that places the warm-up's tasks."""
    truncate: bool = False
    """Truncate each episode once ``workflows`` have arrived after the warm-up (no drain);
    GAE then bootstraps the value of the final observation."""
    max_decisions: int | None = None
    """Truncate each episode after this many policy decisions at the latest (None: no cap)."""
    reward_scale: float | None = None
    """Reward = -(workflow-seconds accrued in the step) x this; None: x 1/workflows (the
    cold-start return is then -mean response time). See docs/training.md."""
    kv_policy: str | None = None
    """KV state in the engines during training and validation (``lru``, ``ttl``,
    ``agent-aware``, ``nocache``; None: memoryless engines). docs/cache.md."""
    residency: str = "planned"
    """The world episodes and validation run in: ``planned`` (a deployment the planner makes
    for each episode's offered rate, load x the planned world's capacity; the default of a
    config without the field) or ``dynamic`` (models loaded on demand: what every shipped
    config and policy was trained in, so those configs say so). docs/worlds.md."""
    settings: list[Setting] = field(default_factory=list)
    """Settings each episode draws one of, uniformly from its seed (cluster, workload, load,
    arrivals, world; ``residency`` unset: the config's), so one run trains across them; the
    groups of ``input_baseline`` share each draw. Empty: the config's cluster, workload and
    loads. Every cluster at the training size."""
    observed_tokens: str = "estimate"
    """The output length LLM calls are costed at in the observation: ``estimate`` or ``p90``
    (what a network distilled from ``tail`` by expert iteration reads; ``init`` must match)."""
    acting: dict[str, Any] = field(default_factory=dict)
    """How the policy's answers act in training and validation, as a trained policy's
    options (``ActingOptions``: ``margin``, ``bound``, ``loads``, ``order``, ``age_cap_s``):
    with a margin the network learns to choose among the bounded candidates it will act
    among. Empty: every feasible server, calls admitted as they arrive."""
    cache_features: bool = False
    """Give the network the two cache server features (expected cached share of the prompt,
    session residency: ``server_dim`` 20 instead of 18); off keeps every older config's
    network and training exactly as they were."""
    # network
    network: str = "scale"
    """``scale`` (cross-attention pointer, any N) or ``mlp16`` (fixed 16 servers)."""
    d_model: int = 64
    """Embedding width (scale)."""
    n_heads: int = 4
    """Attention heads (scale)."""
    server_self_attention: bool = False
    """One self-attention layer among servers before the cross-attention (scale)."""
    scalable_softmax: bool = False
    """Multiply cross-attention logits by s*log(N) with learned s (scale)."""
    heuristic_prior: float = 0.0
    """Initial weight of the learned eft prior on the pointer logits (scale and mlp16; 0: none)."""
    critic_encoder: str = "shared"
    """What SCALE's critic reads (scale): ``shared`` (the actor's embeddings, trained by
    both losses: the paper), ``detached`` (the same, untouched by the value loss) or ``own``
    (its own encoders). Unless shared, the actor's and the critic's gradients are clipped
    separately, so the far larger value gradient no longer shrinks the policy's step."""
    env_sampler: str = "none"
    """Per-episode environment settings (pattern x load x 16-server mix x warm-up):
    ``none`` (the config's cluster, workload and loads), ``uniform`` or ``envsched``
    (prioritised by the learning signal; scalesched.train.envsched)."""
    # SRR
    srr: bool = True
    """Add the SRR regulariser to the loss."""
    srr_decorrelation: float = 0.01
    """Weight of SRR's decorrelation term."""
    srr_kl: float = 0.01
    """Weight of SRR's KL-to-N(0, I) term."""
    srr_decorrelation_norm: str = "pairs"
    """How the squared off-diagonal correlations are averaged: ``pairs`` (over d(d-1)
    pairs, the original) or ``dim`` (summed, divided by d, as VICReg: d-1 times larger, so
    the term's gradient is comparable to the KL term's at equal weights)."""
    # PPO
    num_envs: int = 8
    """Environments stepped in lockstep."""
    num_steps: int = 128
    """Steps per environment per rollout."""
    learning_rate: float = 3e-4
    """Adam step size at the start of training."""
    anneal_lr: bool = True
    """Decay the learning rate linearly to 0 over the run."""
    gamma: float = 0.995
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    num_minibatches: int = 4
    """Minibatches per epoch."""
    update_epochs: int = 4
    """Passes over each rollout."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_coef: float = 0.2
    """PPO ratio clip."""
    clip_vloss: bool = True
    """Clip the value loss around the old value."""
    ent_coef: float = 0.003
    """Entropy bonus weight."""
    vf_coef: float = 0.5
    """Value loss weight."""
    max_grad_norm: float = 0.5
    """Gradient-norm clip."""
    target_kl: float | None = 0.03
    """Stop the epoch loop once the approximate KL exceeds this (None: never)."""
    # bookkeeping
    torch_threads: int = 1
    """torch.set_num_threads: on 2 busy cores, 2 threads can be many times slower than 1."""
    validate_every: int = 20
    """Validate every this many updates (0: only at the end)."""
    validation_sizes: list[int] = field(default_factory=lambda: [16])
    """Cluster sizes (hetero-N) validated on: the training size only, so every other N
    stays unseen by checkpoint selection (strict zero-shot)."""
    validation_seeds: list[int] = field(default_factory=lambda: [1000, 1001, 1002])
    """Fixed workload seeds of the validation runs (evaluation uses 0-99: disjoint)."""
    validation_workflows: int = 600
    """Workflows per validation run, warm-up included."""
    validation_warmup: int = 100
    """The first (by arrival) workflows of a validation run, left out of its mean."""
    validation_load: float | None = None
    """Load of the validation runs (None: ``load``)."""
    validation_baselines: list[str] = field(default_factory=lambda: ["eft", "least_loaded"])
    """Heuristics validated next to the policy; best.pt is kept by the mean ratio to the
    best of them at each size."""
    checkpoint_every: int = 5
    """Write last.pt every this many updates."""
    keep_every: int = 0
    """Also keep ``update-<n>.pt`` every this many updates (0: none), for a choice of
    checkpoint made outside training (on selection settings it never validates on)."""
    # fine-tuning and variance reduction
    init: str | None = None
    """Start from these weights: a shipped policy's name (``scalesched policies``) or a
    checkpoint path; the config's network fields must match it. None: a fresh network."""
    input_baseline: int = 1
    """Environments per arrival sequence. Above 1, each update runs one window per
    environment, groups of this many replaying the same episode (arrivals, task sizes,
    warm-up), and a step's advantage is its return-to-go minus the mean return-to-go of
    the group's other members from the same simulated time (Mao et al., ICLR 2019): the
    luck of the arrivals cancels. Needs ``truncate`` and ``num_envs`` a multiple of it;
    each window is cut at ``num_steps`` decisions at the latest. 1: GAE with the critic."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        return max(1, self.total_steps // self.batch_size)

    def env_config(self) -> EnvConfig:
        return EnvConfig(
            cluster=self.cluster,
            workload=self.workload,
            workflows=self.workflows,
            load=self.load,
            load_min=self.load_min,
            load_max=self.load_max,
            warmup_min=self.warmup_min,
            warmup_max=self.warmup_max,
            warmup_policy=self.warmup_policy,
            truncate=self.truncate,
            max_decisions=self.max_decisions,
            reward_scale=self.reward_scale,
            kv_policy=self.kv_policy,
            server_dim=self.server_dim,
            residency=self.residency,
            observed_tokens=self.observed_tokens,
            acting=self.acting_options(),
        )

    def acting_options(self) -> ActingOptions:
        """``acting`` as the options it names (a ValueError names a bad one)."""
        return ActingOptions(**self.acting)

    @property
    def server_dim(self) -> int:
        """Server features the network reads (``cache_features`` adds the last two)."""
        return SERVER_FEATURES if self.cache_features else BASE_SERVER_FEATURES

    def network_config(self) -> dict[str, Any]:
        base: dict[str, Any] = {"task_dim": TASK_FEATURES, "server_dim": self.server_dim}
        if self.network == "scale":
            base.update(
                d_model=self.d_model,
                n_heads=self.n_heads,
                server_self_attention=self.server_self_attention,
                scalable_softmax=self.scalable_softmax,
            )
            if self.heuristic_prior > 0:  # older checkpoints have no such key
                base["heuristic_prior"] = self.heuristic_prior
            if self.critic_encoder != "shared":
                base["critic_encoder"] = self.critic_encoder
        elif self.heuristic_prior > 0:  # mlp16: the same eft prior on its logits
            base["heuristic_prior"] = self.heuristic_prior
        return base


def load_config(
    path: str | Path | None, *, set_fields: dict[str, Any] | None = None, **overrides: Any
) -> PPOConfig:
    """A validated config from YAML (unknown or ill-typed keys are InputErrors), then
    ``set_fields`` (as given, None included), then ``overrides`` that are not None."""
    source = str(path) if path is not None else "config"
    data = read_mapping(path) if path is not None else {}
    if data.pop("algorithm", "ppo") != "ppo":
        raise InputError(source, "algorithm", "this loader reads PPO configs only")
    if path is not None:
        config_file.clusters_beside(Path(path).parent, data)
    data.update(set_fields or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    cfg = validated(PPOConfig, data, source)
    if cfg.network not in ("scale", "mlp16"):
        raise InputError(source, "network", "must be 'scale' or 'mlp16'")
    if cfg.critic_encoder not in CRITIC_ENCODERS:
        raise InputError(source, "critic_encoder", f"must be one of {', '.join(CRITIC_ENCODERS)}")
    if cfg.critic_encoder != "shared" and cfg.network != "scale":
        raise InputError(source, "critic_encoder", "only the scale network has a choice of critic")
    if cfg.env_sampler not in ("none", "uniform", "envsched"):
        raise InputError(source, "env_sampler", "must be 'none', 'uniform' or 'envsched'")
    if cfg.env_sampler != "none" and cfg.network == "mlp16":
        raise InputError(source, "env_sampler", "EnvSched mixes need a size-agnostic network")
    if cfg.total_steps <= 0 or cfg.num_envs <= 0 or cfg.num_steps <= 0:
        raise InputError(source, "total_steps", "steps and env counts must be positive")
    if cfg.srr_decorrelation_norm not in ("pairs", "dim"):
        raise InputError(source, "srr_decorrelation_norm", "must be 'pairs' or 'dim'")
    if not 0 <= cfg.validation_warmup < cfg.validation_workflows:
        raise InputError(
            source, "validation_warmup", "need 0 <= validation_warmup < validation_workflows"
        )
    from scalesched.policies import HEURISTICS

    for name in [*cfg.validation_baselines, cfg.warmup_policy]:
        if name not in HEURISTICS:
            field_name = "warmup_policy" if name == cfg.warmup_policy else "validation_baselines"
            raise InputError(source, field_name, f"unknown heuristic {name!r}")
    if cfg.validation_sizes and not cfg.validation_baselines:
        raise InputError(source, "validation_baselines", "name at least one heuristic")
    _check_input_baseline(cfg, source)
    _check_acting(cfg, source)
    if cfg.init is not None:
        from scalesched.policies.trained import checkpoint_path

        if not checkpoint_path(cfg.init).is_file():
            raise InputError(source, "init", f"no shipped policy or checkpoint file {cfg.init!r}")
    cfg.env_config().check(source)
    return cfg


def _check_acting(cfg: PPOConfig, source: str) -> None:
    """``acting`` names known options with valid values; ``settings`` exclude EnvSched's."""
    from dataclasses import fields as dataclass_fields

    known = {f.name for f in dataclass_fields(ActingOptions)}
    for key in cfg.acting:
        if key not in known:
            raise InputError(source, f"acting.{key}", f"unknown option; known: {sorted(known)}")
    try:
        cfg.acting_options()
    except (TypeError, ValueError) as exc:
        raise InputError(source, "acting", str(exc)) from None
    if cfg.settings and cfg.env_sampler != "none":
        raise InputError(source, "settings", "give settings or an env_sampler, not both")
    if cfg.settings and cfg.network == "mlp16":
        raise InputError(source, "settings", "drawn clusters need a size-agnostic network")


def _check_input_baseline(cfg: PPOConfig, source: str) -> None:
    """Groups need whole groups of environments on one setting, and windows that end."""
    k = cfg.input_baseline
    if k < 1 or cfg.num_envs % k:
        raise InputError(source, "input_baseline", f"must be >= 1 and divide num_envs, got {k}")
    if k > 1 and not cfg.truncate:
        raise InputError(source, "input_baseline", "needs truncate: true (steady-state windows)")
    if k > 1 and cfg.env_sampler != "none":
        raise InputError(
            source, "input_baseline", "a group shares one setting: needs env_sampler none"
        )


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``--set FIELD=VALUE`` items as PPO config fields (``config_file.parse_overrides``)."""
    return config_file.parse_overrides(items, config_fields())


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def final_values(net: PolicyNetwork, info: dict[str, Any], truncated: np.ndarray) -> torch.Tensor:
    """V(final observation) of each truncated environment, 0 elsewhere.

    With SAME_STEP autoreset the observation a vector env returns for a finished episode is
    already the next episode's first one; the final observation is in ``info["final_obs"]``.
    """
    values = torch.zeros(len(truncated))
    idx = np.flatnonzero(truncated)
    if idx.size == 0:
        return values
    finals = info["final_obs"]
    batch = {key: np.stack([finals[i][key] for i in idx]) for key in finals[idx[0]]}
    with torch.no_grad():
        values[torch.as_tensor(idx)] = net(*obs_to_tensors(batch)).value
    return values


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    next_done: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates of a (T, K) rollout.

    ``dones[t]`` says the observation at step t starts a new episode (the previous step
    ended one); ``next_value``/``next_done`` are those of the observation after the last
    step. A truncated episode's bootstrap, gamma x V(final observation), must already be in
    its last reward: the chain is cut at every episode end.
    """
    t_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(next_value)
    for t in reversed(range(t_steps)):
        if t == t_steps - 1:
            nonterminal, nxt = 1.0 - next_done, next_value
        else:
            nonterminal, nxt = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * nxt * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        advantages[t] = last
    return advantages


def term_grad_norms(params: list[nn.Parameter], terms: dict[str, torch.Tensor]) -> dict[str, float]:
    """L2 norm of each loss term's gradient over ``params`` (0 for a term with no graph)."""
    norms: dict[str, float] = {}
    for name, term in terms.items():
        if not term.requires_grad:
            norms[name] = 0.0
            continue
        grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
        sq = sum(float(g.square().sum()) for g in grads if g is not None)
        norms[name] = math.sqrt(sq)
    return norms


def input_baseline_advantages(
    times: np.ndarray, rewards: np.ndarray, valid: np.ndarray, ends: np.ndarray, group: int
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns-to-go of one window per environment (Mao et al., ICLR 2019).

    ``times``, ``rewards`` and ``valid`` are (T, K): the simulated time of each decision,
    the reward that followed it (the workflow-seconds accrued until the next decision,
    negated and scaled) and whether the step happened; ``ends`` (K,) is each window's last
    time. Environments ``g*group .. (g+1)*group - 1`` replayed the same arrivals. The
    return-to-go of environment j from time t is what it accrued after t (linear between its
    decisions, as the area accrues), and a step's advantage is its own return-to-go minus
    the mean of the group's other members' from the same time: what the arrivals alone did
    to every member cancels. Undiscounted: the window is the horizon."""
    t_steps, k = rewards.shape
    rewards = np.where(valid, rewards, 0.0)
    togo = np.cumsum(rewards[::-1], axis=0)[::-1]  # (T, K) return from each step on
    total = togo[0]
    curves = []
    for j in range(k):
        steps = np.flatnonzero(valid[:, j])
        clock = np.append(times[steps, j], ends[j])
        before = np.append(total[j] - togo[steps, j], total[j])  # accrued before each time
        curves.append((clock, before))
    advantages = np.zeros((t_steps, k))
    for j in range(k):
        g0 = j - j % group
        others = [i for i in range(g0, g0 + group) if i != j]
        at = times[valid[:, j], j]
        baseline = np.mean([total[i] - np.interp(at, *curves[i]) for i in others], axis=0)
        advantages[valid[:, j], j] = togo[valid[:, j], j] - baseline
    return advantages, np.where(valid, togo, 0.0)


def make_envs(cfg: PPOConfig, queue: SettingQueue | None = None) -> gym.vector.SyncVectorEnv:
    env_cfg = cfg.env_config()
    if queue is not None:
        env_cfg = replace(env_cfg, max_servers=16)  # every EnvSched mix has 16 servers
    if cfg.input_baseline > 1:  # one window per update: cut at the rollout's length
        cap = min(cfg.max_decisions or cfg.num_steps, cfg.num_steps)
        env_cfg = replace(env_cfg, max_decisions=cap)

    def factory() -> gym.Env[Any, Any]:
        return SchedulingEnv(env_cfg, setting_source=queue, settings=cfg.settings)

    return gym.vector.SyncVectorEnv(
        [factory for _ in range(cfg.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


@dataclass
class TrainState:
    """What --resume needs beyond the weights."""

    update: int = 0
    global_step: int = 0
    best_score: float = math.inf
    episodes: int = 0


@dataclass
class _Rollout:
    """One rollout's buffers, (T steps, K environments) each: what the policy saw, did and
    got, the state value it predicted, and (EnvSched) each step's setting."""

    task: torch.Tensor
    servers: torch.Tensor
    mask: torch.Tensor
    n: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    values: torch.Tensor
    settings: np.ndarray

    @classmethod
    def empty(cls, t_steps: int, k: int, n_max: int, server_dim: int) -> _Rollout:
        return cls(
            task=torch.zeros((t_steps, k, TASK_FEATURES)),
            servers=torch.zeros((t_steps, k, n_max, server_dim)),
            mask=torch.zeros((t_steps, k, n_max), dtype=torch.bool),
            n=torch.zeros((t_steps, k), dtype=torch.long),
            actions=torch.zeros((t_steps, k), dtype=torch.long),
            logprobs=torch.zeros((t_steps, k)),
            rewards=torch.zeros((t_steps, k)),
            dones=torch.zeros((t_steps, k)),
            values=torch.zeros((t_steps, k)),
            settings=np.full((t_steps, k), -1),
        )


@dataclass
class _Run:
    """What carries from one rollout to the next: the environments, the observation they
    stand at, the returns of episodes in progress, and the recent finished ones."""

    envs: gym.vector.SyncVectorEnv
    queue: SettingQueue | None
    next_obs: tuple[torch.Tensor, ...]
    next_done: torch.Tensor
    episode_return: np.ndarray
    recent_returns: list[float] = field(default_factory=list)
    recent_rt: list[float] = field(default_factory=list)
    wall0: float = 0.0
    steps0: int = 0


@dataclass(frozen=True)
class _Batch:
    """A rollout flattened to one batch of T x K samples, with advantages and returns."""

    task: torch.Tensor
    servers: torch.Tensor
    mask: torch.Tensor
    n: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    adv: torch.Tensor
    returns: torch.Tensor
    values: torch.Tensor

    @classmethod
    def of(
        cls,
        buf: _Rollout,
        advantages: torch.Tensor,
        returns: torch.Tensor,
        server_dim: int,
        valid: torch.Tensor | None = None,
    ) -> _Batch:
        """The rollout's samples, only the ``valid`` (T, K) ones where given."""
        n_max = buf.mask.shape[-1]
        keep = slice(None) if valid is None else valid.reshape(-1)
        return cls(
            task=buf.task.reshape(-1, TASK_FEATURES)[keep],
            servers=buf.servers.reshape(-1, n_max, server_dim)[keep],
            mask=buf.mask.reshape(-1, n_max)[keep],
            n=buf.n.reshape(-1)[keep],
            actions=buf.actions.reshape(-1)[keep],
            logprobs=buf.logprobs.reshape(-1)[keep],
            adv=advantages.reshape(-1)[keep],
            returns=returns.reshape(-1)[keep],
            values=buf.values.reshape(-1)[keep],
        )


@dataclass
class _Losses:
    """The loss terms of one minibatch, and the diagnostics taken on the way."""

    pg: torch.Tensor
    value: torch.Tensor
    entropy: torch.Tensor
    srr: Any
    """SRR's terms (``scalesched.nn.srr.SrrLosses``)."""
    approx_kl: torch.Tensor
    clipfrac: float


@dataclass
class _UpdateStats:
    """What one PPO update reports: the last minibatch's losses, the gradient norm of each
    term (first minibatch), and the share of clipped ratios over all minibatches."""

    stats: dict[str, float] = field(default_factory=dict)
    grad_norms: dict[str, float] = field(default_factory=dict)
    clipfracs: list[float] = field(default_factory=list)


class Trainer:
    """Runs PPO for one config, writing logs and checkpoints under ``out``."""

    def __init__(
        self,
        cfg: PPOConfig,
        out: Path,
        *,
        resume: bool = False,
        progress: Callable[[int, int, dict[str, float]], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.out = out
        self.progress = progress
        torch.set_num_threads(cfg.torch_threads)
        seed_everything(cfg.seed)
        self.net: PolicyNetwork = build_network(cfg.network, **cfg.network_config())
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=cfg.learning_rate, eps=1e-5)
        self.srr_cfg = SrrConfig(
            enabled=cfg.srr,
            decorrelation_weight=cfg.srr_decorrelation,
            kl_weight=cfg.srr_kl,
            decorrelation_norm="dim" if cfg.srr_decorrelation_norm == "dim" else "pairs",
        )
        self.state = TrainState()
        out.mkdir(parents=True, exist_ok=True)
        if resume and (out / "last.pt").is_file():
            self._restore(out / "last.pt")
        elif cfg.init is not None:
            self._load_init(cfg.init)
        self._csv_path = out / "train.csv"
        if resume:
            self._drop_rows_after(self.state.update)
        self._tb: Any = None

    # -- checkpoints -----------------------------------------------------------------
    def checkpoint_payload(self, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "network": self.cfg.network,
            "network_config": self.cfg.network_config(),
            "observed_tokens": self.cfg.observed_tokens,
            "state_dict": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "config": asdict(self.cfg),
            "train_state": asdict(self.state),
            "torch_rng": torch.get_rng_state(),
            "metadata": {
                "name": self.cfg.name,
                "residency": self.cfg.residency,
                **(metadata or {}),
            },
        }

    def _load_init(self, init: str) -> None:
        """Start from a shipped policy's or a checkpoint's weights (fine-tuning): the
        network the config builds must be the one saved, field by field."""
        from scalesched.nn.scheduler import checkpoint_observed_tokens
        from scalesched.policies.trained import checkpoint_path

        path = checkpoint_path(init)
        data = load_checkpoint(path)
        saved_tokens = checkpoint_observed_tokens(data, str(path))
        if saved_tokens != self.cfg.observed_tokens:
            raise InputError(
                str(path),
                "observed_tokens",
                f"is {saved_tokens!r}, the config observes {self.cfg.observed_tokens!r}: "
                f"set observed_tokens: {saved_tokens}",
            )
        saved = {"network": data["network"], **data["network_config"]}
        built = {"network": self.cfg.network, **self.cfg.network_config()}
        for key in sorted(saved.keys() | built.keys()):
            if saved.get(key) != built.get(key):
                raise InputError(
                    str(path),
                    f"network_config.{key}",
                    f"checkpoint has {saved.get(key)!r}, the config builds {built.get(key)!r}",
                )
        self.net.load_state_dict(data["state_dict"])

    def _restore(self, path: Path) -> None:
        data = load_checkpoint(path)
        saved = data.get("config", {})
        for key in (
            "network",
            "d_model",
            "n_heads",
            "server_self_attention",
            "scalable_softmax",
            "critic_encoder",
            "cache_features",
            "residency",
        ):
            # A checkpoint from before the field was trained with dynamic residency.
            was = saved.get(key, "dynamic" if key == "residency" else None)
            if was is not None and was != getattr(self.cfg, key):
                raise InputError(
                    str(path),
                    f"config.{key}",
                    f"checkpoint has {was!r}, config has {getattr(self.cfg, key)!r}",
                )
        self.net.load_state_dict(data["state_dict"])
        self.optimizer.load_state_dict(data["optimizer"])
        self.state = TrainState(**data["train_state"])
        torch.set_rng_state(data["torch_rng"])

    # -- logging ---------------------------------------------------------------------
    def _drop_rows_after(self, update: int) -> None:
        """Rows logged after the checkpoint a run resumes from are redone: drop them, so
        train.csv holds each update once (a row is logged before its checkpoint is saved)."""
        if not self._csv_path.is_file():
            return
        with self._csv_path.open(newline="") as fh:
            rows = list(csv.reader(fh))
        if not rows or "update" not in rows[0]:
            return
        col = rows[0].index("update")
        keep = [r for r in rows[1:] if len(r) > col and r[col] and float(r[col]) <= update]
        if len(keep) == len(rows) - 1:
            return
        tmp = self._csv_path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="") as fh:
            csv.writer(fh).writerows([rows[0], *keep])
        os.replace(tmp, self._csv_path)

    def _columns(self) -> list[str]:
        cols = [
            "global_step",
            "update",
            "learning_rate",
            "episodes",
            "mean_return",
            "mean_response_time_s",
            "policy_loss",
            "value_loss",
            "entropy",
            "srr_decorrelation",
            "srr_kl",
            "grad_norm_policy",
            "grad_norm_value",
            "grad_norm_srr_decorrelation",
            "grad_norm_srr_kl",
            "approx_kl",
            "clipfrac",
            "feature_mean",
            "feature_var",
            "feature_offdiag_corr",
            "steps_per_s",
            "settings_fed",
        ]
        for n in self.cfg.validation_sizes:
            cols += [
                f"val_rt_n{n}",
                *(f"val_{name}_rt_n{n}" for name in self.cfg.validation_baselines),
                f"val_best_rt_n{n}",
                f"val_feature_mean_n{n}",
                f"val_feature_var_n{n}",
                f"val_feature_corr_n{n}",
            ]
        return [*cols, "val_ratio", "val_ratio_to_eft"]

    def _log(self, row: dict[str, float]) -> None:
        new = not self._csv_path.exists()
        with self._csv_path.open("a", newline="") as fh:
            writer = csv.DictWriter(
                fh, fieldnames=self._columns(), restval="", extrasaction="ignore"
            )
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self._tb is None:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.out / "tb"))
            except ImportError:  # tensorboard is optional
                self._tb = False
        if self._tb:
            step = int(row["global_step"])
            for key, value in row.items():
                if key != "global_step" and isinstance(value, int | float) and math.isfinite(value):
                    self._tb.add_scalar(key, value, step)

    def _setting_queue(self) -> SettingQueue | None:
        """EnvSched's queue of per-episode settings, or None to run the config's own."""
        cfg = self.cfg
        if cfg.env_sampler == "none":
            return None
        settings = default_settings()
        sampler: EnvSchedSampler | UniformSampler
        if cfg.env_sampler == "envsched":
            sampler = EnvSchedSampler(settings, seed=cfg.seed)
        else:
            sampler = UniformSampler(settings, seed=cfg.seed)
        return SettingQueue(sampler, cfg.num_envs)

    # -- the loop --------------------------------------------------------------------
    def train(self) -> TrainState:
        """Run the remaining updates: each one a rollout, its advantages, a PPO update, a
        logged row (with validation when due) and a checkpoint when due."""
        cfg = self.cfg
        run = self._start_run()
        n_max = run.envs.single_observation_space["servers"].shape[0]  # type: ignore[index]
        buf = _Rollout.empty(cfg.num_steps, cfg.num_envs, n_max, cfg.server_dim)
        for update in range(self.state.update + 1, cfg.num_updates + 1):
            if cfg.anneal_lr:
                frac = 1.0 - (update - 1.0) / cfg.num_updates
                self.optimizer.param_groups[0]["lr"] = frac * cfg.learning_rate
            valid: torch.Tensor | None = None
            if cfg.input_baseline > 1:
                advantages, returns, valid = self._window_rollout(run, buf, update)
            else:
                self._rollout(run, buf)
                advantages, returns = self._advantages(run, buf)
            settings_fed = (
                run.queue.feed(buf.settings, advantages.numpy()) if run.queue is not None else 0
            )
            batch = _Batch.of(buf, advantages, returns, cfg.server_dim, valid)
            result = self._update(batch)
            row = self._row(update, run, batch, result, settings_fed)
            self._end_update(update, row)
        run.envs.close()
        if self._tb:
            self._tb.close()
        if not (self.out / "best.pt").exists():
            save_checkpoint(self.out / "best.pt", self.checkpoint_payload())
        return self.state

    def _start_run(self) -> _Run:
        """The environments, reset. Each (re)start seeds them from the run seed and the
        update index, so a resumed run is reproducible too."""
        cfg = self.cfg
        queue = self._setting_queue()
        envs = make_envs(cfg, queue)
        obs, _ = envs.reset(seed=cfg.seed + 7919 * self.state.update)
        return _Run(
            envs=envs,
            queue=queue,
            next_obs=obs_to_tensors(obs),
            next_done=torch.zeros(cfg.num_envs),
            episode_return=np.zeros(cfg.num_envs),
            wall0=time.perf_counter(),
            steps0=self.state.global_step,
        )

    def _rollout(self, run: _Run, buf: _Rollout) -> None:
        """T steps of the K environments with the current policy (sampled, no gradient)
        into ``buf``; a truncated episode's last reward gets gamma x V(final observation)."""
        cfg, net, k = self.cfg, self.net, self.cfg.num_envs
        net.eval()
        for step in range(cfg.num_steps):
            self.state.global_step += k
            task, servers, mask, n = run.next_obs
            buf.task[step], buf.servers[step], buf.mask[step], buf.n[step] = (
                task,
                servers,
                mask,
                n,
            )
            buf.dones[step] = run.next_done
            if run.queue is not None:
                buf.settings[step] = [env.setting for env in run.envs.envs]  # type: ignore[attr-defined]
            with torch.no_grad():
                out = net(task, servers, mask, n)
                dist = torch.distributions.Categorical(logits=out.logits)
                action = dist.sample()
            buf.values[step] = out.value
            buf.actions[step] = action
            buf.logprobs[step] = dist.log_prob(action)
            obs, reward, term, trunc, info = run.envs.step(action.numpy())
            run.episode_return += reward
            buf.rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            if trunc.any():  # a cut, not an end: the rest of the episode is worth V
                buf.rewards[step] += cfg.gamma * final_values(net, info, trunc)
            run.next_done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32)
            run.next_obs = obs_to_tensors(obs)
            if "final_info" in info:
                self._record_episodes(run, info)

    def _window_rollout(
        self, run: _Run, buf: _Rollout, update: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``input_baseline``: one window per environment with the current policy (sampled,
        no gradient) into ``buf``, each group's members reset to the same seed (a new one
        per update and group); the input-dependent advantages, returns and the (T, K) mask
        of steps that happened."""
        cfg, net, k, group = self.cfg, self.net, self.cfg.num_envs, self.cfg.input_baseline
        net.eval()
        envs: list[SchedulingEnv] = run.envs.envs  # type: ignore[assignment]
        seed = cfg.seed + 104_729 * update
        obs = [env.reset(seed=seed + i // group)[0] for i, env in enumerate(envs)]
        times, valid = np.zeros((cfg.num_steps, k)), np.zeros((cfg.num_steps, k), dtype=bool)
        active, window_return = np.ones(k, dtype=bool), np.zeros(k)
        buf.rewards.zero_()
        for step in range(cfg.num_steps):
            if not active.any():
                break
            stacked = {key: np.stack([o[key] for o in obs]) for key in obs[0]}
            task, servers, mask, n = obs_to_tensors(stacked)
            buf.task[step], buf.servers[step], buf.mask[step], buf.n[step] = task, servers, mask, n
            with torch.no_grad():
                out = net(task, servers, mask, n)
                dist = torch.distributions.Categorical(logits=out.logits)
                action = dist.sample()
            buf.values[step], buf.actions[step] = out.value, action
            buf.logprobs[step] = dist.log_prob(action)
            for i in np.flatnonzero(active):
                times[step, i], valid[step, i] = envs[i].now, True
                ob, reward, term, trunc, info = envs[i].step(int(action[i]))
                buf.rewards[step, i] = float(reward)
                window_return[i] += reward
                if term or trunc:
                    active[i] = False
                    rt = info.get("episode_metrics", {}).get("window_response_time_s")
                    self._record_episode(run, rt, float(window_return[i]))
                else:
                    obs[i] = ob
        self.state.global_step += int(valid.sum())
        ends = np.array([env.now for env in envs])
        adv, ret = input_baseline_advantages(
            times, buf.rewards.numpy().astype(np.float64), valid, ends, group
        )
        return (
            torch.as_tensor(adv, dtype=torch.float32),
            torch.as_tensor(ret, dtype=torch.float32),
            torch.as_tensor(valid),
        )

    def _record_episode(self, run: _Run, response_s: float | None, episode_return: float) -> None:
        """One finished episode's return and response time (for the log)."""
        rt = math.nan if response_s is None else float(response_s)
        if math.isfinite(rt):
            run.recent_rt.append(rt)
        run.recent_returns.append(episode_return)
        self.state.episodes += 1

    def _record_episodes(self, run: _Run, info: dict[str, Any]) -> None:
        """The return and response time of each episode the vector env just ended."""
        k = self.cfg.num_envs
        metrics = info["final_info"].get("episode_metrics", {})
        for i in np.flatnonzero(info.get("_final_info", [])):
            rt = metrics.get("window_response_time_s", [math.nan] * k)[i]
            self._record_episode(run, rt, float(run.episode_return[i]))
            run.episode_return[i] = 0.0

    def _advantages(self, run: _Run, buf: _Rollout) -> tuple[torch.Tensor, torch.Tensor]:
        """GAE over the rollout, bootstrapped from the value of the next observation; and
        the returns the critic is fitted to."""
        cfg = self.cfg
        with torch.no_grad():
            next_value = self.net(*run.next_obs).value
            advantages = gae(
                buf.rewards,
                buf.values,
                buf.dones,
                next_value,
                run.next_done,
                cfg.gamma,
                cfg.gae_lambda,
            )
            returns = advantages + buf.values
        return advantages, returns

    def _update(self, b: _Batch) -> _UpdateStats:
        """``update_epochs`` passes over shuffled minibatches of the batch, each a clipped
        gradient step; stops early once the approximate KL passes ``target_kl``."""
        cfg, net = self.cfg, self.net
        net.train()
        idx = np.arange(len(b.actions))  # batch_size, or the steps that happened
        minibatch = max(1, len(idx) // cfg.num_minibatches)
        result = _UpdateStats()
        params = [p for p in net.parameters() if p.requires_grad]
        clip_groups = self._clip_groups()
        approx_kl = torch.tensor(0.0)
        for _epoch in range(cfg.update_epochs):
            np.random.shuffle(idx)
            for start in range(0, len(idx), minibatch):
                mb = torch.as_tensor(idx[start : start + minibatch])
                terms = self._losses(b, mb)
                approx_kl = terms.approx_kl
                result.clipfracs.append(terms.clipfrac)
                srr = terms.srr
                loss = (
                    terms.pg - cfg.ent_coef * terms.entropy + cfg.vf_coef * terms.value + srr.total
                )
                if not result.grad_norms:  # once per update: what each term pulls, as weighted
                    result.grad_norms = term_grad_norms(
                        params,
                        {
                            "grad_norm_policy": terms.pg,
                            "grad_norm_value": cfg.vf_coef * terms.value,
                            "grad_norm_srr_decorrelation": self.srr_cfg.decorrelation_weight
                            * srr.decorrelation,
                            "grad_norm_srr_kl": self.srr_cfg.kl_weight * srr.kl,
                        },
                    )
                self.optimizer.zero_grad()
                loss.backward()
                for group in clip_groups:
                    nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
                self.optimizer.step()
                result.stats = {
                    "policy_loss": terms.pg.item(),
                    "value_loss": terms.value.item(),
                    "entropy": terms.entropy.item(),
                    "srr_decorrelation": float(srr.decorrelation.item()),
                    "srr_kl": float(srr.kl.item()),
                    "approx_kl": approx_kl.item(),
                }
            if cfg.target_kl is not None and approx_kl.item() > cfg.target_kl:
                break
        return result

    def _losses(self, b: _Batch, mb: torch.Tensor) -> _Losses:
        """The clipped policy loss, the (optionally clipped) value loss, the entropy and
        SRR's terms of one minibatch, with the approximate KL and the clipped share."""
        cfg = self.cfg
        out = self.net(b.task[mb], b.servers[mb], b.mask[mb], b.n[mb])
        dist = torch.distributions.Categorical(logits=out.logits)
        new_logprob = dist.log_prob(b.actions[mb])
        entropy = dist.entropy()
        logratio = new_logprob - b.logprobs[mb]
        ratio = logratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean()
            clipfrac = ((ratio - 1.0).abs() > cfg.clip_coef).float().mean().item()
        mb_adv = b.adv[mb]
        if cfg.norm_adv and mb_adv.numel() > 1:
            mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
        pg_loss = torch.max(
            -mb_adv * ratio,
            -mb_adv * torch.clamp(ratio, 1 - cfg.clip_coef, 1 + cfg.clip_coef),
        ).mean()
        v_loss = self._value_loss(out.value, b, mb)
        ent = entropy.mean()
        srr = srr_losses(out.attn_feature, self.srr_cfg)
        return _Losses(pg_loss, v_loss, ent, srr, approx_kl, clipfrac)

    def _value_loss(self, new_value: torch.Tensor, b: _Batch, mb: torch.Tensor) -> torch.Tensor:
        """Half the squared error to the returns; with ``clip_vloss``, the worse of that and
        the error of a value kept within ``clip_coef`` of the rollout's."""
        cfg = self.cfg
        if cfg.clip_vloss:
            v_unclipped = (new_value - b.returns[mb]) ** 2
            v_clipped = b.values[mb] + torch.clamp(
                new_value - b.values[mb], -cfg.clip_coef, cfg.clip_coef
            )
            return 0.5 * torch.max(v_unclipped, (v_clipped - b.returns[mb]) ** 2).mean()
        return 0.5 * ((new_value - b.returns[mb]) ** 2).mean()

    def _row(
        self, update: int, run: _Run, b: _Batch, result: _UpdateStats, settings_fed: int
    ) -> dict[str, float]:
        """The update's row of train.csv: progress, recent episodes, the update's losses,
        gradient norms and clipped share, and statistics of the attention feature."""
        with torch.no_grad():
            feats = self.net(b.task[:1024], b.servers[:1024], b.mask[:1024], b.n[:1024])
            fstats = feature_stats(feats.attn_feature)
        elapsed = time.perf_counter() - run.wall0
        recent_returns, recent_rt, clipfracs = run.recent_returns, run.recent_rt, result.clipfracs
        return {
            "global_step": self.state.global_step,
            "update": update,
            "learning_rate": self.optimizer.param_groups[0]["lr"],
            "episodes": self.state.episodes,
            "mean_return": float(np.mean(recent_returns[-20:])) if recent_returns else math.nan,
            "mean_response_time_s": float(np.mean(recent_rt[-20:])) if recent_rt else math.nan,
            **result.stats,
            **result.grad_norms,
            "clipfrac": float(np.mean(clipfracs)) if clipfracs else 0.0,
            "feature_mean": fstats["mean"],
            "feature_var": fstats["var"],
            "feature_offdiag_corr": fstats["mean_abs_offdiag_corr"],
            "steps_per_s": (self.state.global_step - run.steps0) / max(elapsed, 1e-9),
            "settings_fed": settings_fed,
        }

    def _end_update(self, update: int, row: dict[str, float]) -> None:
        """Validate when due (and always after the last update), log the row, save
        last.pt when due, report progress."""
        cfg = self.cfg
        self.state.update = update
        last_update = update == cfg.num_updates
        if (cfg.validate_every and update % cfg.validate_every == 0) or last_update:
            row.update(self.validate())
        self._log(row)
        if update % cfg.checkpoint_every == 0 or last_update:
            save_checkpoint(self.out / "last.pt", self.checkpoint_payload())
        if cfg.keep_every and update % cfg.keep_every == 0:
            save_checkpoint(self.out / f"update-{update}.pt", self.checkpoint_payload())
        if self.progress is not None:
            self.progress(update, cfg.num_updates, row)

    def _clip_groups(self) -> list[list[nn.Parameter]]:
        """Parameter sets whose gradient norms are clipped each on its own: the whole
        network, or the actor and a critic that does not share the actor's encoder."""
        critic: list[nn.Parameter] = getattr(self.net, "critic_parameters", list)()
        if not critic:
            return [list(self.net.parameters())]
        critic_ids = {id(p) for p in critic}
        return [[p for p in self.net.parameters() if id(p) not in critic_ids], critic]

    # -- validation ------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        """Mean response time at each validation size on fixed seeds, next to each baseline
        heuristic's; keeps best.pt by the mean ratio to the best baseline over the sizes the
        network can run (``val_ratio``; ``val_ratio_to_eft`` as well when eft is a baseline)."""
        from scalesched.nn.scheduler import NetworkScheduler
        from scalesched.policies.ordering import in_admission_order

        acting = self.cfg.acting_options()
        scheduler = NetworkScheduler(
            self.net,
            name=self.cfg.name,
            record_features=True,
            observed_tokens=self.cfg.observed_tokens,
            candidates=acting.candidate_set(),
        )
        acts = in_admission_order(scheduler, acting.order, acting.age_cap_s)
        row: dict[str, float] = {}
        ratios, eft_ratios = [], []
        for n in self.cfg.validation_sizes:
            try:
                ours, baselines = validation_response_times(self.cfg, acts, n)
            except ValueError:  # a fixed-size network cannot run at this N
                continue
            row[f"val_rt_n{n}"] = ours
            for name, rt in baselines.items():
                row[f"val_{name}_rt_n{n}"] = rt
            best = min(baselines.values())
            row[f"val_best_rt_n{n}"] = best
            ratios.append(ours / best)
            if "eft" in baselines:
                eft_ratios.append(ours / baselines["eft"])
        for n, st in scheduler.feature_stats().items():
            row[f"val_feature_mean_n{n}"] = st["mean"]
            row[f"val_feature_var_n{n}"] = st["var"]
            row[f"val_feature_corr_n{n}"] = st["mean_abs_offdiag_corr"]
        self.net.train()
        if ratios:
            score = float(np.mean(ratios))
            row["val_ratio"] = score
            meta: dict[str, Any] = {"val_ratio": score, "update": self.state.update}
            if eft_ratios:
                row["val_ratio_to_eft"] = meta["val_ratio_to_eft"] = float(np.mean(eft_ratios))
            if score < self.state.best_score:
                self.state.best_score = score
                save_checkpoint(
                    self.out / "best.pt",
                    self.checkpoint_payload(meta),
                )
        return row


_baseline_cache: dict[tuple[Any, ...], float] = {}


def validation_response_times(
    cfg: PPOConfig, scheduler: Any, n: int
) -> tuple[float, dict[str, float]]:
    """Mean response time at hetero-n over the validation seeds: the policy's and each
    baseline's. Each run's first ``validation_warmup`` workflows (by arrival) are left out,
    so long runs measure the steady state rather than the cold start. In the planned world
    the runs are on the plan for the validation load (``runs.world.resolve_world``)."""
    from scalesched.cluster import get_cluster
    from scalesched.cluster.tables import ClusterTables
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, build_jobs
    from scalesched.runs.world import resolve_world

    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    load = cfg.validation_load if cfg.validation_load is not None else cfg.load
    rate, deployment, _ = resolve_world(spec, cfg.workload, cfg.residency, rate=None, load=load)
    run_tables = tables if deployment is None else ClusterTables(spec, deployment)
    ours: list[float] = []
    theirs: dict[str, list[float]] = {name: [] for name in cfg.validation_baselines}
    for seed in cfg.validation_seeds:
        jobs = build_jobs(
            tables,
            Scenario(
                workload=cfg.workload,
                workflows=cfg.validation_workflows,
                load=load,
                rate=rate,
                seed=seed,
            ),
        )

        def measured(policy: Any, jobs: Any = jobs, seed: int = seed) -> float:
            times = run_all(spec, run_tables, jobs, policy, seed, cfg.kv_policy)
            return float(np.mean(times[cfg.validation_warmup :]))

        ours.append(measured(scheduler))
        for name in cfg.validation_baselines:
            key = (
                n,
                seed,
                name,
                cfg.workload,
                cfg.validation_workflows,
                load,
                cfg.validation_warmup,
                cfg.kv_policy,
                cfg.residency,
            )
            if key not in _baseline_cache:
                _baseline_cache[key] = measured(get_policy(name))
            theirs[name].append(_baseline_cache[key])
    return float(np.mean(ours)), {name: float(np.mean(v)) for name, v in theirs.items()}


def run_all(
    spec: Any, tables: Any, jobs: Any, policy: Any, seed: int, kv_policy: str | None = None
) -> np.ndarray:
    """Every workflow's response time, in arrival order, with ``policy`` placing all tasks.

    Driven here rather than through ``sim.run.simulate`` so the slice taken by validation
    does not depend on which workflows that function's metrics window keeps."""
    from scalesched.sim.engine import Simulation
    from scalesched.sim.run import run_to_end

    sim = Simulation(spec, jobs, ready_order=policy.ready_order, tables=tables, kv_policy=kv_policy)
    policy.reset(seed)
    run_to_end(sim, policy)
    return sim.response_times


def config_fields() -> list[str]:
    return [f.name for f in fields(PPOConfig)]
