"""How much of a policy's gap is deployment, placement and ordering (docs/headroom.md).

Every figure is a mean over one set of workflows: the study's measured window (the same
jobs, the same seed, the same warm-up cut for every run), so differences pair workflow by
workflow and get a batch-means interval (``scalesched.stats.batch_means`` of the per-
workflow differences).

The bounds, lowest first:

* ``any_deployment_s``: every call alone on the fastest configuration *any* deployment of
  the cluster can give its model (``cluster.anywhere``): no allocation of the cluster's GPUs
  lets any schedule beat it;
* ``best_allocation_s``: the tightest bound here that holds over every allocation: the
  larger of ``any_deployment_s`` and ``allocation_s``, the capacity-aware program over
  every configuration any deployment could pin with the allocation of the cluster's GPUs
  as variables (``eval.headroom.allocation``; ``any_deployment_s`` alone where that
  program was not solved);
* ``deployment_s``: the tighter of this deployment's contention-free and capacity-aware
  bounds (``Headroom.bound_s``): no scheduler on *this* deployment beats it.

The parts:

* **deployment**: ``deployment_s - best_allocation_s``, what this deployment costs even a
  perfect scheduler against the best allocation's bound (the same for every policy); and,
  measured, ``planning_gain_s``: the best heuristic on dynamic residency (models loaded on
  demand, the same jobs at the same rate) minus the best heuristic on this deployment;
* **placement**: per policy, ``mean - deployment_s``, what a scheduler within this
  deployment could still win; with an oracle run, how much of it the oracle won;
* **ordering**: per ordering rule (``fcfs_workflow``, ``plas``), its mean minus its
  placement router's alone (the same router, the engine queues ordered by the rule): what
  ordering changes for the same placement rule.

Identities (exact up to rounding, ``Split.residuals``): per policy ``mean - best_allocation_s
= deployment + placement``; and for the best heuristic the ladder ``dynamic best -
best_allocation_s = planning_gain + deployment + placement``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scalesched.stats import batch_means

ORDERING_RULES: tuple[str, ...] = ("fcfs_workflow", "plas")
"""The ordering rules the split measures (``scalesched.policies.ordering``)."""


@dataclass(frozen=True)
class Paired:
    """``a - b`` over the same workflows: the difference of means and its interval."""

    a: str
    b: str
    diff_s: float
    ci_s: float
    """Half-width of the 95% interval by batch means of the per-workflow differences
    (NaN: too few workflows)."""

    def as_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "diff_s": self.diff_s, "ci_s": self.ci_s}


def paired(a: str, b: str, series: Mapping[str, np.ndarray]) -> Paired:
    """``a``'s mean minus ``b``'s over the workflows both finished."""
    x, y = np.asarray(series[a], dtype=float), np.asarray(series[b], dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"{a} and {b} were measured over different windows")
    both = np.isfinite(x) & np.isfinite(y)
    d = x[both] - y[both]
    if not d.size:
        return Paired(a, b, math.nan, math.nan)
    return Paired(a, b, float(d.mean()), batch_means(d).half_width)


@dataclass(frozen=True)
class Bounds:
    """The three bounds of the split (module doc), seconds per measured workflow."""

    any_deployment_s: float
    deployment_s: float
    deployment_contention_free_s: float
    allocation_s: float | None = None
    """The capacity-aware bound over allocations (None: not solved)."""

    @property
    def best_allocation_s(self) -> float:
        """Both bounds hold for every allocation, so their maximum does too (the program's
        Lagrangian form, priced on a sample, can fall below the contention-free one)."""
        if self.allocation_s is None:
            return self.any_deployment_s
        return max(self.any_deployment_s, self.allocation_s)

    def as_json(self) -> dict[str, Any]:
        return {
            "any_deployment_s": self.any_deployment_s,
            "allocation_s": self.allocation_s,
            "best_allocation_s": self.best_allocation_s,
            "deployment_s": self.deployment_s,
            "deployment_contention_free_s": self.deployment_contention_free_s,
        }


@dataclass(frozen=True)
class Split:
    """The split of one study (``split`` builds it)."""

    bounds: Bounds
    means: dict[str, float]
    """Per policy row on this deployment: its mean over the window."""
    best: str | None
    dynamic: dict[str, float]
    """Per heuristic run on dynamic residency (same jobs): its mean over the window."""
    dynamic_best: str | None
    planning_gain: Paired | None
    ordering: list[tuple[str, Paired, float, float]] = field(default_factory=list)
    """(ordering rule, its mean minus its placement router's, the two means)."""
    oracle: dict[str, float] = field(default_factory=dict)
    """Per oracle row: its mean."""
    dynamic_steady: dict[str, bool] = field(default_factory=dict)

    @property
    def deployment_s(self) -> float:
        return self.bounds.deployment_s - self.bounds.best_allocation_s

    def placement_s(self, policy: str) -> float:
        return self.means[policy] - self.bounds.deployment_s

    def total_s(self, policy: str) -> float:
        return self.means[policy] - self.bounds.best_allocation_s

    def ladder(self) -> dict[str, float] | None:
        """For the best heuristic: dynamic best - best allocation, and its three parts."""
        if self.best is None or self.dynamic_best is None or self.planning_gain is None:
            return None
        return {
            "dynamic_best_s": self.dynamic[self.dynamic_best],
            "total_s": self.dynamic[self.dynamic_best] - self.bounds.best_allocation_s,
            "planning_gain_s": self.dynamic[self.dynamic_best] - self.means[self.best],
            "deployment_s": self.deployment_s,
            "placement_s": self.placement_s(self.best),
        }

    def residuals(self) -> list[float]:
        """What each identity of the module doc leaves over: 0 up to rounding."""
        out = [self.total_s(p) - self.deployment_s - self.placement_s(p) for p in self.means]
        ladder = self.ladder()
        if ladder is not None:
            parts = ladder["planning_gain_s"] + ladder["deployment_s"] + ladder["placement_s"]
            out.append(ladder["total_s"] - parts)
        return out

    def as_json(self) -> dict[str, Any]:
        placement = {
            p: {
                "mean_s": m,
                "total_gap_s": self.total_s(p),
                "deployment_s": self.deployment_s,
                "placement_s": self.placement_s(p),
                "oracle": p in self.oracle,
            }
            for p, m in self.means.items()
        }
        return {
            "bounds": self.bounds.as_json(),
            "deployment": {
                "deployment_s": self.deployment_s,
                "configurations_s": self.bounds.deployment_contention_free_s
                - self.bounds.any_deployment_s,
                "capacity_s": self.bounds.deployment_s - self.bounds.deployment_contention_free_s,
                "any_allocation_capacity_s": self.bounds.best_allocation_s
                - self.bounds.any_deployment_s,
                "planned_best": self.best,
                "planned_best_mean_s": self.means.get(self.best) if self.best else None,
                "dynamic_best": self.dynamic_best,
                "dynamic_means_s": self.dynamic,
                "dynamic_steady": self.dynamic_steady,
                "planning_gain": self.planning_gain.as_json() if self.planning_gain else None,
                "ladder": self.ladder(),
            },
            "placement": placement,
            "ordering": {
                rule: {**change.as_json(), "mean_s": mean, "router_mean_s": router}
                for rule, change, mean, router in self.ordering
            },
        }


def ordering_specs(placement: str, rules: Sequence[str] = ORDERING_RULES) -> list[str]:
    """The policy spec of each rule over ``placement`` (a placement router's name): the
    plain rule over ``tail`` (its default placement), ``rule:placement=...`` otherwise."""
    return [rule if placement == "tail" else f"{rule}:placement={placement}" for rule in rules]
