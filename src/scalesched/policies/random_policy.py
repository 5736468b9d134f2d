"""Uniformly random feasible server: the floor any scheduler must clear."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class RandomScheduler(BaseScheduler):
    name = "random"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def select(self, decision: Decision) -> int:
        feasible = np.flatnonzero(decision.mask)
        return int(feasible[self._rng.integers(feasible.size)])
