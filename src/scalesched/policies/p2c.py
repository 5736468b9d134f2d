"""Power of two choices on expected delay (Mitzenmacher): sample two feasible servers at
random and take the one with the smaller estimated finish plus imposed delay.

Randomised sampling spreads load without herding every decision onto the same "best"
server, which full-information greedy policies (eft) do when their estimates lag reality.
"""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class PowerOfTwoScheduler(BaseScheduler):
    name = "p2c"
    places_only = True  # sim.compiled_loop: answers with a server only
    compiled_policy = "p2c"  # sim.compiled_run: the same draws from its generator, in C++

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x2C]))

    @property
    def generator(self) -> np.random.Generator:
        """The generator it draws from (a compiled run continues its stream)."""
        return self._rng

    def select(self, decision: Decision) -> int:
        feasible = np.flatnonzero(decision.mask)
        two = feasible.size > 2
        pick = self._rng.choice(feasible, size=2, replace=False) if two else feasible
        score = decision.finish_s[pick] + decision.imposed_s[pick]
        return int(pick[int(np.argmin(score))])
