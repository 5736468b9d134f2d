"""A bounded candidate set for learned policies: the servers ``tail`` rates near its best.

Why: a learned policy beats the best heuristic by about 1% where it was trained and can be
far worse elsewhere (docs/robustness.md), because nothing stops one choice from landing on
a server every cost model rates as slow. With a margin, the network still chooses, but
only among the servers whose ``tail`` score (predicted p90 finish plus the delay imposed
on the server's batch, :class:`~scalesched.policies.tail.TailScheduler`) is within
``margin`` (a fraction) of the best score of that decision: ``score <= best * (1 +
margin)``. ``margin=0`` keeps ``tail``'s own choice and its exact ties.

The bound limits how far one choice strays from ``tail``'s estimate; it does not bound the
end-to-end regret (a run of choices each within the margin can still queue worse than
``tail``'s). It is applied once, for every trained policy, where the policy is named:
``scale-dagger:margin=0.1`` (:class:`scalesched.policies.trained.ActingOptions`). This
module imports no torch: the network side applies the set to its scores.

A bound is only as safe as the heuristic it follows: on a cluster where ``tail`` itself
falls into long congestion and ``eft`` does not (pcie-lab at load 0.8 with models loaded on
demand, docs/robustness.md), ``bound=eft`` measures the margin from ``eft``'s score
(estimated finish plus imposed delay) instead. ``bound=auto`` chooses per decision: ``tail``'s
score, unless ``tail``'s own pick lacks the call's model and the free and idle GPUs there
cannot hold its engine. That load waits for engines with requests to drain, a wait
``tail``'s cost model prices as the server's mean remaining work per task and that runs far
longer on clusters short of GPUs; there the decision is bounded by ``eft``, which starts a
third to a fifth of ``tail``'s loads. On a deployment no call starts a load, so ``auto`` is
``tail``'s bound.
"""

from __future__ import annotations

import math
from typing import Literal, get_args

import numpy as np

from scalesched.decision.features import Decision
from scalesched.policies.eft import eft_choice, eft_scores
from scalesched.policies.tail import TailScheduler

MAX_MARGIN = 10.0
"""Largest margin accepted: beyond 10x the best predicted finish every server of any
cluster so far is a candidate, so the bound would only hide a typo."""


def check_margin(margin: float) -> float:
    """``margin`` as a float, or ``ValueError`` (the options parser reports it in one line
    naming the policy and the option)."""
    if not (math.isfinite(margin) and 0.0 <= margin <= MAX_MARGIN):
        raise ValueError(f"margin must be in [0, {MAX_MARGIN:g}], got {margin}")
    return float(margin)


Bound = Literal["tail", "eft", "auto"]
"""The heuristics whose score a margin may be measured from (``auto``: ``tail``'s, or
``eft``'s where ``tail``'s pick would wait for GPUs to load the call's model)."""
BOUNDS: tuple[str, ...] = get_args(Bound)


def check_bound(bound: str) -> str:
    """``bound`` as given, or ``ValueError`` naming the choices."""
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {', '.join(BOUNDS)}, got {bound!r}")
    return bound


Loads = Literal["any", "bound", "free", "eft"]
"""Which model loads a bounded policy may start: ``any`` within the margin; only those its
bounding heuristic's own pick would start (``bound``); or those and the loads that evict no
engine, on a server with enough free GPUs (``free``); or only where ``eft``'s own pick
would start one (``eft``: no load while ``eft`` would join a running engine)."""


class ScoreMargin:
    """The candidate set of a decision: feasible servers within ``margin`` of the best score
    of ``bound`` (``tail`` by default, ``eft``, or ``auto``, which follows ``eft`` where
    ``tail``'s pick would wait for GPUs); never empty while a server is feasible:
    that heuristic's own pick is in it. With ``loads="bound"`` a server without the call's
    model is a candidate only where that pick lacks it too: a load looks cheap within the
    margin, yet it evicts an idle engine that a later call needs. With ``loads="free"`` such
    a server is also a candidate where its free GPUs hold the model's engine, so the load
    evicts nothing. With ``loads="eft"`` it is a candidate only where ``eft``'s pick lacks
    the model too (``tail``, at its p90 output length, starts three to five times the loads
    ``eft`` does on clusters short of GPUs); if that leaves no candidate, ``eft``'s pick is
    the one."""

    def __init__(self, margin: float, bound: str = "tail", loads: str = "any") -> None:
        self.margin = check_margin(margin)
        self.bound = check_bound(bound)
        if loads not in get_args(Loads):
            raise ValueError(f"loads must be one of {', '.join(get_args(Loads))}, got {loads!r}")
        self.loads = loads
        self.tail = TailScheduler() if bound in ("tail", "auto") else None

    def scores(self, decision: Decision) -> np.ndarray:
        """(N,) the bounding heuristic's score of each server (inf where infeasible)."""
        if self.tail is None:
            return eft_scores(decision)
        tail = self.tail.scores(decision)
        if self.bound == "auto" and tail.size and decision.load_waits[int(np.argmin(tail))]:
            return eft_scores(decision)
        return tail

    def allowed(self, decision: Decision) -> np.ndarray:
        """(N,) bool: the servers the policy may choose for ``decision``."""
        scores = self.scores(decision)
        pick = int(np.argmin(scores)) if scores.size else -1
        best = float(scores[pick]) if scores.size else math.inf
        if not math.isfinite(best):
            return np.asarray(decision.mask, dtype=bool).copy()
        limit = best + self.margin * abs(best)
        # Relative tolerance for float rounding, so that exact ties of the best stay in.
        allowed = np.asarray(decision.mask, dtype=bool) & (scores <= limit * (1 + 1e-12) + 1e-12)
        if self.loads == "bound":
            absent = decision.model_absent
            if not absent[pick]:
                allowed &= ~absent
        elif self.loads == "free":
            evicts = decision.model_absent & ~decision.model_fits_free
            evicts[pick] = False
            allowed &= ~evicts
        elif self.loads == "eft":
            allowed = self._loads_as_eft(decision, pick if self.bound == "eft" else None, allowed)
        return allowed

    @staticmethod
    def _loads_as_eft(decision: Decision, eft_pick: int | None, allowed: np.ndarray) -> np.ndarray:
        """``allowed`` less the servers without the call's model where ``eft``'s pick (None:
        asked of :func:`eft_choice` now) has it; that pick alone if none is left."""
        first = eft_choice(decision) if eft_pick is None else eft_pick
        absent = decision.model_absent
        if absent[first]:
            return allowed
        kept = allowed & ~absent
        if not kept.any():
            kept[first] = True
        return kept

    def reset(self, seed: int) -> None:
        """A new run: ``tail``'s scores start from the cost model as is."""
        if self.tail is not None:
            self.tail.reset(seed)
