"""Placement policies behind one registry: ``get_policy(name)`` gives a fresh scheduler."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scalesched.decision.scheduler import BaseScheduler, Scheduler
from scalesched.errors import InputError
from scalesched.policies.cache_aware import CacheAwareScheduler
from scalesched.policies.eft import EftScheduler
from scalesched.policies.hedge import HedgeScheduler
from scalesched.policies.heft_online import HeftOnlineScheduler
from scalesched.policies.kv_aware import KvAwareScheduler
from scalesched.policies.least_loaded import LeastLoadedScheduler
from scalesched.policies.p2c import PowerOfTwoScheduler
from scalesched.policies.random_policy import RandomScheduler
from scalesched.policies.rollout import RolloutScheduler
from scalesched.policies.round_robin import RoundRobinScheduler
from scalesched.policies.shortest_queue import ShortestQueueScheduler
from scalesched.policies.soft_eft import SoftEftScheduler
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
    "pred_mean": (PredictedMeanScheduler, "eft at the predicted mean output length"),
    "hedge": (HedgeScheduler, "tail, hedged on 2-3 servers when Monte-Carlo says it pays"),
    "cache_aware": (CacheAwareScheduler, "SGLang router: prefix match over 0.5, else balance"),
    "rollout": (
        RolloutScheduler,
        "oracle: tail's top 3 tried in sim forks, 20 s ahead",
    ),
    "tao": (TaoScheduler, "TAO: joint admission/placement by DP (readiness, cache credit, KV)"),
}

STRONG_HEURISTICS: tuple[str, ...] = (
    "eft",
    "heft_online",
    "least_loaded",
    "kv_aware",
    "p2c",
    "soft_eft",
)
"""The candidates for "the best heuristic": every table compares against the best of these
on the same runs, and measured capacity is the highest rate one of them sustains."""


def list_policies() -> list[tuple[str, str]]:
    from scalesched.policies.trained import shipped_policies

    rows = [(name, doc) for name, (_, doc) in HEURISTICS.items()]
    rows += [
        (name, "shipped trained policy (see docs/model-card.md)")
        for name in sorted(shipped_policies())
    ]
    return rows


def get_policy(name: str) -> Scheduler:
    """A new scheduler: a heuristic by name, or a trained policy by checkpoint path."""
    from scalesched.policies.trained import shipped_policies

    entry = HEURISTICS.get(name)
    if entry is not None:
        return entry[0]()
    shipped = shipped_policies()
    if name in shipped:
        from scalesched.nn.scheduler import load_scheduler  # torch only when asked for

        return load_scheduler(shipped[name], name=name)
    if name.endswith(".pt") or Path(name).is_file():
        from scalesched.nn.scheduler import load_scheduler  # torch only when asked for

        path = Path(name).resolve()
        own = [k for k, v in shipped.items() if v.resolve() == path]
        return load_scheduler(name, name=own[0] if own else name)
    known = ", ".join([*HEURISTICS, *sorted(shipped)])
    raise InputError(
        "--policy", "policy", f"unknown policy {name!r}; known: {known}, or a checkpoint path"
    )


__all__ = [
    "BaseScheduler",
    "Scheduler",
    "get_policy",
    "list_policies",
    "HEURISTICS",
    "STRONG_HEURISTICS",
]
