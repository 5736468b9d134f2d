"""Placement policies behind one registry: ``get_policy(name)`` gives a fresh scheduler."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from scalesched.decision.scheduler import BaseScheduler, Scheduler
from scalesched.errors import InputError
from scalesched.policies.cache_aware import CacheAwareScheduler
from scalesched.policies.eft import EftScheduler
from scalesched.policies.hedge import HedgeScheduler
from scalesched.policies.heft_online import HeftOnlineScheduler
from scalesched.policies.kv_aware import KvAwareScheduler
from scalesched.policies.least_loaded import LeastLoadedScheduler
from scalesched.policies.options import build_with_options, split_spec
from scalesched.policies.order_rollout import OrderRolloutScheduler
from scalesched.policies.ordering import (
    FcfsWorkflowScheduler,
    PlasScheduler,
    ShortestRemainingScheduler,
    in_admission_order,
)
from scalesched.policies.p2c import PowerOfTwoScheduler
from scalesched.policies.random_policy import RandomScheduler
from scalesched.policies.rollout import RolloutScheduler, SampledRolloutScheduler
from scalesched.policies.round_robin import RoundRobinScheduler
from scalesched.policies.shortest_queue import ShortestQueueScheduler
from scalesched.policies.soft_eft import SoftEftScheduler
from scalesched.policies.soft_tail import SoftTailScheduler
from scalesched.policies.tail import (
    PredictedMeanScheduler,
    ScaleOutTailScheduler,
    TailScheduler,
)
from scalesched.policies.tao import TaoScheduler

HEURISTICS: dict[str, tuple[Callable[[], Scheduler], str]] = {
    "random": (RandomScheduler, "uniformly random feasible server"),
    "round_robin": (RoundRobinScheduler, "cycle through feasible servers"),
    "least_loaded": (LeastLoadedScheduler, "least outstanding estimated work"),
    "shortest_queue": (ShortestQueueScheduler, "fewest unfinished tasks assigned"),
    "eft": (EftScheduler, "earliest estimated finish (queue, load, transfer, speed)"),
    "heft_online": (HeftOnlineScheduler, "eft placement, HEFT upward-rank order"),
    "kv_aware": (KvAwareScheduler, "production router: queue, running batch and KV usage"),
    "p2c": (PowerOfTwoScheduler, "power of two choices on estimated finish + imposed delay"),
    "soft_eft": (SoftEftScheduler, "eft with sampling near the best estimate (seeded)"),
    "tail": (TailScheduler, "eft at the predicted p90 output length (shipped predictor)"),
    "tail_scaleout": (ScaleOutTailScheduler, "tail + a replica load when predicted p99 misses SLO"),
    "soft_tail": (SoftTailScheduler, "tail with sampling near its best score (seeded)"),
    "pred_mean": (PredictedMeanScheduler, "eft at the predicted mean output length"),
    "hedge": (HedgeScheduler, "tail, hedged on 2-3 servers when Monte-Carlo says it pays"),
    "plas": (PlasScheduler, "tail's placement, least attained service of the workflow first"),
    "shortest_remaining": (
        ShortestRemainingScheduler,
        "tail's placement, least predicted remaining workflow work first",
    ),
    "fcfs_workflow": (FcfsWorkflowScheduler, "tail's placement, oldest workflow first"),
    "cache_aware": (CacheAwareScheduler, "SGLang router: prefix match over 0.5, else balance"),
    "tao": (TaoScheduler, "TAO: joint admission/placement by DP (readiness, cache credit, KV)"),
    "rollout": (
        SampledRolloutScheduler,
        "tail's top 3 tried in forks of the simulation, 20 s of a sampled future, 1 fork "
        "each (slow; simulator only, else tail; options: SampledRolloutScheduler fields)",
    ),
    "order_rollout": (
        OrderRolloutScheduler,
        "fcfs_workflow's placement; where a call would wait, its workflow's order or its "
        "own, tried in forks on a sampled future (slow; simulator only; the ordering "
        "head's expert)",
    ),
}

ORACLES: dict[str, tuple[Callable[[], Scheduler], str]] = {
    "rollout_oracle": (
        RolloutScheduler,
        "research: tail's top 3 tried in forks of the simulation, 20 s of the true future "
        "(clairvoyant; simulator only)",
    ),
}
"""Policies that see what no deployed scheduler can (the true future, through forks of the
simulation): bounds on what placement could still win (docs/headroom.md), never candidates
for the best heuristic. Slow (hundreds of forks per second of simulated time), so the tests
that run every heuristic leave them to their own tests."""

BEST_HEURISTIC_CANDIDATES: tuple[str, ...] = (
    "eft",
    "heft_online",
    "least_loaded",
    "kv_aware",
    "p2c",
    "soft_eft",
    "tail",
    "fcfs_workflow",
)
"""The heuristics "the best heuristic" is chosen from, in every table, the demo and ``eval``:
the placement-only routers that have led somewhere in the studies (``tail`` at steady state
on agentic-mix, ``soft_eft`` at load 0.9 and N = 96, eft and heft_online on other mixes,
kv_aware on a100-lab; docs/reproduction.md, docs/steady-state.md), and the one ordering
baseline that has: ``fcfs_workflow`` (``tail``'s placement, oldest workflow admitted
first) is 0.925 +- 0.012x ``tail`` under bursty arrivals at load 0.9, every run steady, and
level with it under Poisson arrivals (docs/headroom-map.md). Last, so ties go to the
placement routers. ``plas`` and ``shortest_remaining`` win on some seeds and lose on others
(docs/headroom-map.md). Left out on purpose:
policies that buy their speed with more than a placement (``hedge`` runs extra copies,
``tail_scaleout`` loads replicas, ``tao`` defers admission), the cache routers that need
``--kv-policy``, ``pred_mean`` (tail's router at the mean estimate, within noise of ``tail``:
docs/tail.md) and the weak baselines. Measured capacity is a different question (which
policy sustains the highest rate) with its own list, ``runs.capacity.CAPACITY_POLICIES``."""

STRONG_HEURISTICS = BEST_HEURISTIC_CANDIDATES
"""The former name of :data:`BEST_HEURISTIC_CANDIDATES` (one tuple, two names)."""

RESEARCH_ONLY: dict[str, str] = {
    "rollout_oracle": "clairvoyant: reads the true future in forks of the simulation, so it "
    "cannot run outside the simulator; an upper bound on placement (docs/headroom.md)",
    "pred_mean": "ablation of tail (the mean estimate instead of the p90): separates acting on "
    "the tail from a better point estimate (docs/tail.md, section 3)",
    "tail_scaleout": "the scale-out study: off by default, no gain beyond noise on agentic-mix "
    "for 2-3% of GPU-seconds; the Ray runtime refuses replica loads (docs/tail.md, section 6)",
    "scale-nosrr": "ablation of scale without SRR, kept to measure the SRR gain "
    "(docs/reproduction.md)",
    "scale-ssm": "ablation: scale with scalable-softmax attention, no SRR (docs/reproduction.md)",
    "scale-ssm-srr": "ablation: scale with scalable-softmax attention and SRR "
    "(docs/reproduction.md)",
    "rollout": "lookahead in forks of the simulation on sampled futures: runs in the simulator "
    "only, about 0.4 s per contested decision (docs/headroom.md)",
    "order_rollout": "the ordering head's expert in training: a per-call admission order "
    "chosen by lookahead in forks; simulator only (docs/robust-training.md)",
    "soft_tail": "control for scale-dagger: tail plus sampling near its best score, to tell "
    "whether the distilled network learned more than that (docs/training.md)",
    "mlp-16": "fixed-size baseline that runs at N = 16 only, kept to show why scale's "
    "size-free network matters (docs/model-card.md)",
}
"""Policies kept to reproduce a study or as an ablation or oracle, by name, with why:
listed (``scalesched policies`` marks them) and runnable like any other, but not a choice
for a deployment. The shipped default learned policy is ``scale``; its variants are here."""


def best_heuristic(results_by_policy: Mapping[str, float | Sequence[float]]) -> str | None:
    """The one definition of "the best heuristic": of the :data:`BEST_HEURISTIC_CANDIDATES`
    present in ``results_by_policy`` (policy -> mean response time, or the response times of
    its runs, lower is better), the one with the lowest mean; ties go to the earlier
    candidate. None when no candidate has a finite result. Other policies in the mapping
    (learned ones, weak baselines) are ignored, so a table's "best heuristic" never depends
    on which extra policies were run beside the candidates."""
    means: dict[str, float] = {}
    for name in BEST_HEURISTIC_CANDIDATES:
        value = results_by_policy.get(name)
        if value is None:
            continue
        values = [float(value)] if isinstance(value, int | float) else [float(v) for v in value]
        finite = [v for v in values if math.isfinite(v)]
        if finite:
            means[name] = math.fsum(finite) / len(finite)
    return min(means, key=means.__getitem__) if means else None


def list_policies() -> list[tuple[str, str]]:
    from scalesched.policies.trained import describe, shipped_policies

    rows = [(name, doc) for name, (_, doc) in {**HEURISTICS, **ORACLES}.items()]
    rows += [(name, describe(name)) for name in sorted(shipped_policies())]
    return rows


def base_name(spec: str) -> str:
    """The registered name of a policy spec: ``"rollout:horizon_s=10"`` -> ``"rollout"``
    (a name without options, or a checkpoint path, as is)."""
    name, options = split_spec(spec)
    return name if options is not None and name in {**HEURISTICS, **ORACLES} else spec


def is_learned(spec: str) -> bool:
    """Whether a policy spec names a trained policy (shipped or a checkpoint): neither a
    heuristic nor an oracle, with or without options."""
    name = base_name(spec)
    return name not in HEURISTICS and name not in ORACLES


def get_policy(name: str) -> Scheduler:
    """A new scheduler: a heuristic or oracle by name, with options as
    ``NAME:KEY=VALUE,...`` (:mod:`scalesched.policies.options`), or a trained policy by
    name or checkpoint path."""
    from scalesched.policies.trained import load_trained_acting, shipped_policies

    registered, options = split_spec(name)
    entry = HEURISTICS.get(registered) or ORACLES.get(registered)
    if entry is not None and options is not None:
        return build_with_options(registered, entry[0], options)
    entry = HEURISTICS.get(name) or ORACLES.get(name)
    if entry is not None:
        return entry[0]()
    trained = load_trained_acting(name)
    if trained is not None:
        network, acting = trained
        return in_admission_order(network, acting.order, acting.age_cap_s)
    known = ", ".join([*HEURISTICS, *ORACLES, *sorted(shipped_policies())])
    raise InputError(
        "--policy", "policy", f"unknown policy {name!r}; known: {known}, or a checkpoint path"
    )


__all__ = [
    "BaseScheduler",
    "Scheduler",
    "get_policy",
    "base_name",
    "is_learned",
    "list_policies",
    "HEURISTICS",
    "ORACLES",
    "BEST_HEURISTIC_CANDIDATES",
    "STRONG_HEURISTICS",
    "RESEARCH_ONLY",
    "best_heuristic",
]
