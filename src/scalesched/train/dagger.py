"""Expert iteration (DAgger) for SCALE: the network's own states, labelled by an expert,
distilled into the pointer network with cross-entropy and SRR.

Why not more PPO: PPO from the eft prior drifts (docs/training.md): the return of one
placement is buried in the variance of the arrivals that follow it. An expert that
searches (a rollout over a heuristic, :mod:`scalesched.policies.rollout`) gives a label per
decision instead, so learning is supervised. DAgger (Ross, Gordon and Bagnell, AISTATS
2011) trains on the states the *network* visits, not only the expert's, so the network
learns to recover from its own mistakes.

One iteration ``i``:

1. run ``episodes`` simulations of the training setting (workload seeds from
   :data:`TRAIN_SEED_BASE`, never the evaluation's 0-99 nor validation's 1000+); at every
   decision the expert answers (the label) and, with probability ``beta0 * beta_decay**i``,
   its answer is carried out, else the network's (sampled from its distribution);
2. add every (observation, label) to the data set of all iterations so far;
3. fit the network on the whole data set for ``epochs`` epochs: cross-entropy of the
   masked logits against the label, plus SRR on the attention feature;
4. validate the network (sampling, as shipped) on ``validation_seeds`` at the training
   size (mean response over the steady window, as a ratio to the expert's base heuristic
   on the same seeds) and keep the best iteration's weights.

Train and select at the training size only; evaluation at other sizes and on mixes never
trained on is the evaluation's job (``scalesched eval``).

The expert is any registered policy: ``rollout_oracle`` (clairvoyant lookahead: an upper
reference), ``rollout`` where shipped (sampled futures), or a plain heuristic such as
``tail`` (behaviour cloning, cheap: how the tests exercise this module). Every random
choice derives from ``seed``: same config, same checkpoint.

An expert that also orders the engines' queues (``fcfs_workflow``, ``plas``: a priority on
each ``Place``) teaches placement only. With ``order_by_expert`` the network's placements
are admitted in the expert's order, in the episodes and in validation, so the network
learns the placement that suits that order; it is then used as
``fcfs_workflow:placement=<checkpoint>``. Order and placement are separate choices, and on
a mix with one fast server the order is worth more than the placement (docs/training.md).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import ConfigDict
from torch import nn

from scalesched.decision.actions import Action, Place, as_action, workflow_order
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler, Scheduler, places_only
from scalesched.env.settings import Setting
from scalesched.errors import InputError
from scalesched.nn import PolicyNetwork, SrrConfig, build_network, srr_losses
from scalesched.nn.checkpoint import load_checkpoint, save_checkpoint
from scalesched.nn.common import obs_to_tensors
from scalesched.nn.observation import OBSERVED_TOKENS
from scalesched.nn.scheduler import NetworkScheduler, network_from_checkpoint
from scalesched.policies import BEST_HEURISTIC_CANDIDATES, best_heuristic, get_policy
from scalesched.policies.trained import checkpoint_path
from scalesched.runs.setup import RunSetup, Scenario, prepare, run
from scalesched.sim.scenario import check_arrivals
from scalesched.train.config_file import clusters_beside, read_mapping, validated

TRAIN_SEED_BASE = 100_000
"""Workload seeds of training episodes start here: disjoint from evaluation (0-99) and
validation (1000+)."""
BEST = "best"
"""``expert: best``: each training setting's expert is its best heuristic
(:func:`scalesched.policies.best_heuristic` over the candidates, run on that setting), and
validation's yardstick is each validation setting's best heuristic on the same runs."""
SEEDS_PER_RUN = 1000
"""Training seeds of one config seed: episodes count up from ``TRAIN_SEED_BASE + 1000 x
seed``; the runs that pick each setting's best heuristic count down from the top."""


@dataclass
class DaggerConfig:
    """Everything one expert-iteration run depends on; a YAML file with ``algorithm:
    dagger`` sets any subset of these fields (``scalesched train --config``)."""

    __pydantic_config__ = ConfigDict(extra="forbid")

    cluster: str = "hetero-16"
    """Training cluster (a preset or a YAML path); train and select at this size only."""
    workload: str = "agentic-mix"
    """Workload of the training and validation episodes."""
    load: float = 0.9
    """Offered load as a fraction of measured capacity, where the map shows room."""
    arrivals: str = "poisson"
    """Arrival process of the episodes and validation runs (``Scenario.arrivals``)."""
    residency: str = "planned"
    """The world episodes and validation run in: ``planned`` (a deployment planned for each
    setting's offered rate; the default of a config without the field) or ``dynamic``
    (models loaded on demand: what the shipped configs and policies were trained in, so
    those configs say so). docs/worlds.md."""
    more_settings: list[Setting] = field(default_factory=list)
    """Further settings besides ``cluster``/``workload``/``load``: episode ``k`` of the run
    uses setting ``k`` modulo their number, and validation averages over all of them (the
    regimes where the headroom map shows room; keep their clusters at the training size)."""
    workflows: int = 300
    """Workflows per training episode."""
    expert: str = "rollout_oracle"
    """Registered policy whose answers are the labels, or ``best``: in each setting its best
    heuristic, picked on one run of ``expert_workflows`` on a training seed."""
    expert_workflows: int = 1000
    """With ``expert: best``: workflows of the run that picks each setting's expert."""
    selection_settings: list[Setting] = field(default_factory=list)
    """Settings validation runs on instead of the training ones, so that the checkpoint is
    chosen on settings never trained on (keep their clusters at the training size); empty:
    validation runs on the training settings."""
    observed_tokens: str = "estimate"
    """Output length the network's decisions are costed at: ``estimate`` (the role's static
    one, as eft) or ``p90`` (the shipped predictor's, as tail); the checkpoint records it."""
    order_by_expert: bool = False
    """Admit the network's placements in the expert's order (its ``Place.priority``) in the
    episodes and in validation; use the result as ``<expert>:placement=<checkpoint>``."""
    learn_order: bool = False
    """Train the network's ordering head (added to the init if it has none) on the expert's
    admission order: workflow order where the expert gives ``fcfs_workflow``'s priority,
    the call's own where it gives none. The network then orders as well as places."""
    fit_placement: bool = True
    """Fit the placement too; False (with ``learn_order``): the ordering head alone, the
    placement kept exactly as the init's."""
    init: str = "scale"
    """Starting weights: a shipped policy's name or a checkpoint path."""
    iterations: int = 4
    """DAgger iterations (collect, aggregate, fit, validate)."""
    episodes: int = 2
    """Training episodes per iteration."""
    beta0: float = 1.0
    """Probability that the expert's answer is carried out in iteration 0."""
    beta_decay: float = 0.5
    """Factor on that probability per iteration (DAgger's mixing schedule)."""
    epochs: int = 4
    """Passes over the aggregated data set per iteration."""
    minibatch: int = 256
    """Decisions per gradient step."""
    lr: float = 1e-4
    """Adam learning rate."""
    max_grad_norm: float = 0.5
    """Gradient clipping, as in PPO."""
    srr_decorrelation: float = 0.01
    """Weight of SRR's decorrelation term (0 with ``srr_kl`` 0: no SRR)."""
    srr_kl: float = 0.01
    """Weight of SRR's KL-to-N(0, I) term."""
    validation_seeds: list[int] = field(default_factory=lambda: [1000, 1001])
    """Workload seeds of the validation runs (evaluation uses 0-99: disjoint)."""
    validation_workflows: int = 300
    """Workflows per validation run."""
    seed: int = 0
    """Seed of the network's sampling, the mixing draws, the shuffles and the episodes."""
    out: str = "runs/dagger"
    """Folder for ``best.pt``, ``last.pt`` and ``dagger.csv``."""

    def __post_init__(self) -> None:
        self.check("DaggerConfig")

    def check(self, source: str) -> None:
        """InputError naming ``source`` and the field for any value out of range."""
        checks = {
            "workflows": self.workflows >= 1,
            "iterations": self.iterations >= 1,
            "episodes": self.episodes >= 1,
            "beta0": 0.0 <= self.beta0 <= 1.0,
            "beta_decay": 0.0 <= self.beta_decay <= 1.0,
            "epochs": self.epochs >= 1,
            "minibatch": self.minibatch >= 2,
            "lr": self.lr > 0,
            "load": self.load > 0,
            "validation_seeds": bool(self.validation_seeds),
            "validation_workflows": self.validation_workflows >= 1,
            "expert_workflows": self.expert_workflows >= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise InputError(source, name, f"out of range: {getattr(self, name)!r}")
        listed = [("more_settings", x) for x in self.more_settings] + [
            ("selection_settings", x) for x in self.selection_settings
        ]
        for where, x in listed:
            if not x.load > 0:
                raise InputError(source, where, "every load must be > 0")
            if x.residency not in (None, "planned", "dynamic"):
                raise InputError(
                    source, where, f"residency must be planned or dynamic, got {x.residency!r}"
                )
        for where, arrivals in [("arrivals", self.arrivals)] + [
            (where, x.arrivals) for where, x in listed
        ]:
            try:  # a replay must hold the longest run's times: an episode or a validation
                check_arrivals(arrivals, max(self.workflows, self.validation_workflows))
            except InputError as exc:
                raise InputError(source, where, exc.message) from None
        if self.iterations * self.episodes + len(self.more_settings) + 1 > SEEDS_PER_RUN:
            raise InputError(
                source,
                "iterations",
                f"iterations x episodes plus the settings must stay within {SEEDS_PER_RUN} "
                "training seeds",
            )
        if self.learn_order and self.order_by_expert:
            raise InputError(
                source, "learn_order", "the network orders itself: drop order_by_expert"
            )
        if not self.fit_placement and not self.learn_order:
            raise InputError(source, "fit_placement", "false needs learn_order: nothing to fit")
        if self.order_by_expert and self.expert == BEST:
            raise InputError(
                source, "order_by_expert", "needs one named expert to take the order from"
            )
        if self.residency not in ("planned", "dynamic"):
            raise InputError(
                source, "residency", f"must be planned or dynamic, got {self.residency!r}"
            )
        if self.observed_tokens not in OBSERVED_TOKENS:
            known = ", ".join(OBSERVED_TOKENS)
            raise InputError(
                source, "observed_tokens", f"one of {known}, got {self.observed_tokens!r}"
            )
        if set(self.validation_seeds) & set(range(100)):
            raise InputError(source, "validation_seeds", "must avoid evaluation's seeds 0-99")


def load_config(
    path: str | Path | None, *, set_fields: dict[str, Any] | None = None, **overrides: Any
) -> DaggerConfig:
    """A validated config from YAML (``algorithm: dagger`` plus any fields of
    :class:`DaggerConfig`), then ``set_fields``, then ``overrides`` that are not None."""
    source = str(path) if path is not None else "config"
    data = read_mapping(path) if path is not None else {}
    data.pop("algorithm", None)
    if path is not None:
        clusters_beside(Path(path).parent, data)
    data.update(set_fields or {})
    data.update({k: v for k, v in overrides.items() if v is not None})
    return validated(DaggerConfig, data, source)


@dataclass
class Dataset:
    """The aggregated (observation, label) pairs of every iteration so far."""

    task: list[np.ndarray] = field(default_factory=list)
    servers: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    n_servers: list[np.ndarray] = field(default_factory=list)
    target: list[np.ndarray] = field(default_factory=list)
    """Per decision, (N,) probabilities: uniform over the servers the expert rates as good
    as its answer (identical servers tie; a one-hot label would teach an arbitrary index)."""
    order: list[float] = field(default_factory=list)
    """Per decision, 1.0 where the expert admits the call in workflow order, else 0.0."""

    def add(self, obs: dict[str, np.ndarray], target: np.ndarray, order: float = 0.0) -> None:
        self.task.append(obs["task"])
        self.servers.append(obs["servers"])
        self.mask.append(obs["mask"])
        self.n_servers.append(obs["n_servers"])
        self.target.append(target)
        self.order.append(order)

    def __len__(self) -> int:
        return len(self.target)

    def tensors(self) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The network's inputs and the (B, N) target distributions, stacked (the order
        labels: ``order_targets``)."""
        stacked = {
            "task": np.stack(self.task),
            "servers": np.stack(self.servers),
            "mask": np.stack(self.mask),
            "n_servers": np.concatenate(self.n_servers),
        }
        return obs_to_tensors(stacked), torch.as_tensor(np.stack(self.target))

    def order_targets(self) -> torch.Tensor:
        """(B,) the order labels, float."""
        return torch.as_tensor(self.order, dtype=torch.float32)


TIE_RTOL = 1e-9
"""Expert scores this close (relative) to its answer's count as the same answer."""


def expert_target(expert: Scheduler, decision: Decision, server: int) -> np.ndarray:
    """(N,) label distribution: uniform over the feasible servers whose expert score (its
    ``scores``, or a rollout's ``base_scores``, where it has one) equals that of ``server``;
    one-hot on ``server`` otherwise."""
    target = np.zeros(decision.n_servers, dtype=np.float32)
    score_of = getattr(expert, "scores", None) or getattr(expert, "base_scores", None)
    if score_of is None:
        target[server] = 1.0
        return target
    score = np.asarray(score_of(decision), dtype=float)
    ref = score[server]
    tied = decision.mask & (np.abs(score - ref) <= TIE_RTOL * max(1.0, abs(ref)))
    tied[server] = True
    target[tied] = 1.0 / int(tied.sum())
    return target


class Labeller(BaseScheduler):
    """Asks the expert at every decision (the label) and carries out its answer with
    probability ``beta``, else the student's; records the pair in ``data``.

    Only placements are learned: a decision the expert answers with another action (a
    hedge, a deferral) is carried out as the expert's when the expert acts, and left out of
    the data set. With ``in_expert_order`` the student's placement keeps the expert's
    priority (the engine's admission order); ``data`` None records nothing (validation)."""

    name = "dagger"

    def __init__(
        self,
        student: NetworkScheduler,
        expert: Scheduler,
        beta: float,
        data: Dataset | None,
        seed: int,
        in_expert_order: bool = False,
    ) -> None:
        self.student, self.expert, self.beta, self.data = student, expert, beta, data
        self.in_expert_order = in_expert_order
        self.ready_order = expert.ready_order
        self._rng = np.random.default_rng(seed)
        self.labelled = 0
        self.expert_acted = 0

    def reset(self, seed: int) -> None:
        self.student.reset(seed)
        self.expert.reset(seed)

    @property
    def places_only(self) -> bool:
        """Whether every answer is a placement (``sim.compiled_loop``): the expert's and
        the student's both are (a rollout expert, which forks the simulation, is not)."""
        return places_only(self.expert) and places_only(self.student)

    def select(self, decision: Decision) -> int | Action:
        answer = self.expert.select(decision)
        action = as_action(answer)
        expert_acts = bool(self._rng.random() < self.beta)
        server = getattr(action, "server", None)
        priority = getattr(action, "priority", None)
        if self.data is not None and server is not None and not getattr(action, "loads", ()):
            self.data.add(
                self.student.observation(decision),
                expert_target(self.expert, decision, int(server)),
                order_label(self.expert, decision, int(server), priority),
            )
            self.labelled += 1
        if expert_acts or server is None:
            self.expert_acted += 1
            return answer
        mine = self.student.select(decision)
        if not self.in_expert_order or priority is None:
            return mine
        place = as_action(mine)
        if not isinstance(place, Place):
            return mine
        return Place(place.server, place.loads, priority)


def order_label(
    expert: Scheduler, decision: Decision, server: int, priority: float | None
) -> float:
    """1.0 where the expert admits the call in workflow order (``fcfs_workflow``'s
    priority), 0.0 where it gives no priority or the call's own (now: the ordering head's
    other choice), NaN where the expert says the order changes nothing on ``server``
    (its ``contested``, as ``order_rollout`` has: no label); an expert ordering by anything
    else cannot teach the ordering head, and says so."""
    contested = getattr(expert, "contested", None)
    if contested is not None and not contested(decision, server):
        return math.nan
    if priority is None:
        return 0.0
    if priority == workflow_order(decision):
        return 1.0
    if priority == decision.now:
        return 0.0
    raise InputError(
        "config",
        "learn_order",
        f"expert {expert.name} orders by another priority than workflow order",
    )


def load_student(init: str, ordering_head: bool = False) -> tuple[PolicyNetwork, dict[str, Any]]:
    """The network to train (a shipped policy's weights or a checkpoint's) and the
    checkpoint it came from; with ``ordering_head``, a SCALE network gains a fresh ordering
    head where it has none (its ``network_config`` in the returned checkpoint says so)."""
    path = checkpoint_path(init)
    data = load_checkpoint(path)
    net = network_from_checkpoint(data, str(path))
    if not ordering_head or data["network_config"].get("ordering_head"):
        return net, data
    if data["network"] != "scale":
        raise InputError(str(path), "network", "only a scale network takes an ordering head")
    config = {**data["network_config"], "ordering_head": True}
    grown = build_network("scale", **config)
    missing, unexpected = grown.load_state_dict(net.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("order_head.") for k in missing)
    return grown, {**data, "network_config": config}


def base_of(expert: str) -> str:
    """The heuristic an expert searches over (``rollout*``: its ``base``), the yardstick of
    validation; a plain heuristic is its own."""
    base = getattr(get_policy(expert), "base", None)
    return base if isinstance(base, str) else expert


def fit(
    net: nn.Module,
    data: Dataset,
    cfg: DaggerConfig,
    optimizer: torch.optim.Optimizer,
    rng: torch.Generator,
) -> dict[str, float]:
    """``cfg.epochs`` passes of cross-entropy to the labels plus SRR over ``data`` (with
    ``learn_order``, plus the ordering head's binary cross-entropy to the order labels;
    without ``fit_placement``, that alone); the last epoch's mean loss terms, the share of
    decisions whose argmax is a label and, with ``learn_order``, whose order is."""
    inputs, targets = data.tensors()
    orders = data.order_targets()
    labelled_orders = ~torch.isnan(orders)
    srr_cfg = SrrConfig(
        enabled=cfg.srr_decorrelation > 0 or cfg.srr_kl > 0,
        decorrelation_weight=cfg.srr_decorrelation,
        kl_weight=cfg.srr_kl,
    )
    net.train()
    sums: dict[str, float] = {}
    for _ in range(cfg.epochs):
        sums = {"ce": 0.0, "srr": 0.0, "order": 0.0, "steps": 0.0}
        shuffled = torch.randperm(len(targets), generator=rng)
        for start in range(0, len(targets), cfg.minibatch):
            mb = shuffled[start : start + cfg.minibatch]
            out = net(*(x[mb] for x in inputs), need_value=False)
            terms = {"ce": out.logits.new_zeros(()), "srr": out.logits.new_zeros(())}
            if cfg.fit_placement:
                terms["ce"] = nn.functional.cross_entropy(out.logits, targets[mb])
                terms["srr"] = srr_losses(out.attn_feature, srr_cfg).total
            if cfg.learn_order:
                assert out.order_logit is not None  # load_student added the head
                labelled = labelled_orders[mb]  # NaN: the order changed nothing there
                if bool(labelled.any()):
                    terms["order"] = nn.functional.binary_cross_entropy_with_logits(
                        out.order_logit[labelled], orders[mb][labelled]
                    )
            loss = sum(terms.values(), out.logits.new_zeros(()))
            if loss.requires_grad:  # not where a head-only batch holds no order label
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
                optimizer.step()
            for name, term in terms.items():
                sums[name] += float(term.item())
            sums["steps"] += 1
    net.eval()
    with torch.no_grad():
        out = net(*inputs, need_value=False)
        hits = targets.gather(1, out.logits.argmax(dim=1)[:, None]) > 0  # one of the tied best
        figures = {"accuracy": float(hits.float().mean().item())}
        if cfg.learn_order and out.order_logit is not None:
            agree = (out.order_logit > 0).float() == orders
            figures["order_accuracy"] = float(agree[labelled_orders].float().mean().item())
            figures["order_labelled"] = float(labelled_orders.float().mean().item())
    steps = max(1.0, sums.pop("steps"))
    if not cfg.learn_order:
        sums.pop("order")
    return {**{name: total / steps for name, total in sums.items()}, **figures}


def settings_of(cfg: DaggerConfig) -> list[Setting]:
    """The training settings: the main one, then ``more_settings``, each in its world."""
    main = Setting(cfg.cluster, cfg.workload, cfg.load, cfg.arrivals)
    return [_in_world(x, cfg) for x in (main, *cfg.more_settings)]


def worlds_of(cfg: DaggerConfig) -> list[str]:
    """The worlds the training settings run in, sorted (one for most configs)."""
    return sorted({x.residency or cfg.residency for x in settings_of(cfg)})


def validation_settings(cfg: DaggerConfig) -> list[Setting]:
    """Where the checkpoint is chosen: ``selection_settings``, else the training ones."""
    if cfg.selection_settings:
        return [_in_world(x, cfg) for x in cfg.selection_settings]
    return settings_of(cfg)


def _in_world(setting: Setting, cfg: DaggerConfig) -> Setting:
    residency = setting.residency or cfg.residency
    return Setting(setting.cluster, setting.workload, setting.load, setting.arrivals, residency)


def _setup(setting: Setting, workflows: int, seed: int) -> RunSetup:
    scenario = Scenario(
        workload=setting.workload,
        workflows=workflows,
        load=setting.load,
        seed=seed,
        arrivals=setting.arrivals,
        residency=setting.residency or "planned",
    )
    return prepare(setting.cluster, scenario)


def _candidate_means(setup: RunSetup) -> dict[str, float]:
    """Each best-heuristic candidate's mean response (steady window) on one run."""
    return {
        name: float(run(setup, name).metrics["avg_response_time_s"])
        for name in BEST_HEURISTIC_CANDIDATES
    }


def experts_of(cfg: DaggerConfig, say: Callable[[str], None]) -> list[str]:
    """The expert of each training setting: ``cfg.expert``, or with ``expert: best`` the
    best heuristic of the setting on one run of ``expert_workflows`` (a training seed,
    counted down from the top of the config seed's range)."""
    settings = settings_of(cfg)
    if cfg.expert != BEST:
        return [cfg.expert] * len(settings)
    top = TRAIN_SEED_BASE + SEEDS_PER_RUN * (cfg.seed + 1) - 1
    experts = []
    for i, setting in enumerate(settings):
        means = _candidate_means(_setup(setting, cfg.expert_workflows, top - i))
        name = best_heuristic(means)
        if name is None:
            raise InputError("config", "expert", f"no candidate finished on {setting.cluster}")
        say(f"setting {i} ({setting.cluster}, {setting.workload}): expert {name}")
        experts.append(name)
    return experts


class Validation:
    """The validation runs of every validation setting and seed, prepared and measured
    under the yardstick on first use: the base heuristic of the expert, or with ``expert:
    best`` the best heuristic of each setting over its seeds. A yardstick run is seeded by
    its scenario, so it gives the same figure at every iteration and is run once."""

    def __init__(self, cfg: DaggerConfig) -> None:
        self.cfg = cfg
        self._runs: list[tuple[RunSetup, float]] | None = None
        self.yardsticks: list[str] = []
        """The heuristic each validation setting is measured against."""

    def runs(self) -> list[tuple[RunSetup, float]]:
        """(setup, the yardstick's mean response) per validation setting and seed."""
        if self._runs is None:
            self._runs = []
            cfg = self.cfg
            for setting in validation_settings(cfg):
                length = cfg.validation_workflows
                setups = [_setup(setting, length, seed) for seed in cfg.validation_seeds]
                if cfg.expert == BEST:
                    per_seed = [_candidate_means(setup) for setup in setups]
                    by_policy = {p: [m[p] for m in per_seed] for p in BEST_HEURISTIC_CANDIDATES}
                    name = best_heuristic(by_policy) or "tail"
                    means = by_policy[name]
                else:
                    name = base_of(cfg.expert)
                    means = [float(run(x, name).metrics["avg_response_time_s"]) for x in setups]
                self.yardsticks.append(name)
                self._runs += list(zip(setups, means, strict=True))
        return self._runs

    def ratio(self, net: PolicyNetwork) -> float:
        """Mean over the runs of the network's mean response (steady window), acting as it
        is shipped (sampling from its distribution, seeded), divided by the yardstick's on
        the same run: below 1 the network beats it."""
        ratios = []
        for setup, theirs in self.runs():
            student = NetworkScheduler(
                copy.deepcopy(net), name="dagger", observed_tokens=self.cfg.observed_tokens
            )
            acting: Scheduler = student
            if self.cfg.order_by_expert:  # the student places, the expert orders
                expert = get_policy(self.cfg.expert)
                acting = Labeller(student, expert, 0.0, None, 0, in_expert_order=True)
            mine = float(run(setup, acting).metrics["avg_response_time_s"])
            ratios.append(mine / theirs if theirs > 0 else math.inf)
        return float(np.mean(ratios))


def train(
    cfg: DaggerConfig, progress: Callable[[str], None] | None = None
) -> list[dict[str, float]]:
    """Run expert iteration; write ``best.pt`` (lowest validation ratio), ``last.pt`` and
    ``dagger.csv`` under ``cfg.out``; return one row of figures per iteration."""
    say = progress or (lambda _line: None)
    torch.set_num_threads(1)  # the same sums in the same order on any machine: same seed, same run
    torch.manual_seed(cfg.seed)
    net, saved = load_student(cfg.init, ordering_head=cfg.learn_order)
    trained = net.parameters() if cfg.fit_placement else _order_head(net).parameters()
    optimizer = torch.optim.Adam(trained, lr=cfg.lr)
    shuffle = torch.Generator().manual_seed(cfg.seed)
    validation = Validation(cfg)
    data = Dataset()
    rows: list[dict[str, float]] = []
    best = math.inf
    out = Path(cfg.out)
    settings = settings_of(cfg)
    experts = experts_of(cfg, say)
    for it in range(cfg.iterations):
        beta = cfg.beta0 * cfg.beta_decay**it
        for ep in range(cfg.episodes):
            k = cfg.episodes * it + ep
            seed = TRAIN_SEED_BASE + SEEDS_PER_RUN * cfg.seed + k
            student = NetworkScheduler(net, name="dagger", observed_tokens=cfg.observed_tokens)
            expert = get_policy(experts[k % len(settings)])
            labeller = Labeller(student, expert, beta, data, seed, cfg.order_by_expert)
            setup = _setup(settings[k % len(settings)], cfg.workflows, seed)
            run(setup, labeller, warmup=0, cooldown=0)
            say(f"iteration {it} episode {ep}: {labeller.labelled} labels, beta {beta:.2f}")
        figures = fit(net, data, cfg, optimizer, shuffle)
        ratio = validation.ratio(net)
        row = {"iteration": float(it), "beta": beta, "decisions": float(len(data)), **figures}
        row["validation_ratio"] = ratio
        rows.append(row)
        say(", ".join(f"{k} {v:.4g}" for k, v in row.items()))
        payload = _payload(net, saved, cfg, row, experts, validation.yardsticks)
        save_checkpoint(out / "last.pt", payload)
        if ratio < best:
            best = ratio
            save_checkpoint(out / "best.pt", payload)
    _write_csv(out / "dagger.csv", rows)
    return rows


def _order_head(net: nn.Module) -> nn.Module:
    """The ordering head of a network that has one."""
    head = getattr(net, "order_head", None)
    if not isinstance(head, nn.Module):
        raise TypeError(f"{type(net).__name__} has no ordering head")
    return head


def _payload(
    net: nn.Module,
    saved: dict[str, Any],
    cfg: DaggerConfig,
    row: dict[str, float],
    experts: list[str],
    yardsticks: list[str],
) -> dict[str, Any]:
    worlds = "+".join(worlds_of(cfg))
    metadata = {"name": "dagger", "algorithm": "dagger", "residency": worlds, **row}
    return {
        "network": saved["network"],
        "network_config": saved["network_config"],
        "state_dict": net.state_dict(),
        "config": asdict(cfg),
        "observed_tokens": cfg.observed_tokens,
        "metadata": {**metadata, "experts": experts, "yardsticks": yardsticks},
    }


def _write_csv(path: Path, rows: list[dict[str, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = list(rows[0])
    lines = [",".join(columns)] + [",".join(f"{r[c]:.6g}" for c in columns) for r in rows]
    path.write_text("\n".join(lines) + "\n")
