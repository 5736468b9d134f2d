"""eft with randomised ties: sample a server with probability proportional to
``exp(-temperature_inv * log1p(relative excess of its estimated finish over the best))``.

Greedy eft sends every decision to the single best estimate, and estimates lag reality:
between two decisions the chosen server's batch has grown in ways the next estimate sees
only partly, so eft herds. Sampling near the best spreads that load. This is also exactly
what an untrained SCALE network with the eft prior (``heuristic_prior``) does, so it is the
baseline that tells what learning adds on top of the prior. Seeded by ``reset``.
"""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision, relative_excess
from scalesched.decision.scheduler import BaseScheduler

SHARPNESS = 5.0
"""Weight on the relative-finish feature; the eft prior of the shipped configs starts at 5."""


class SoftEftScheduler(BaseScheduler):
    name = "soft_eft"
    places_only = True  # sim.compiled_loop: answers with a server only
    compiled_policy = "soft_eft"  # sim.compiled_run: the same draws from its generator, in C++
    sharpness = SHARPNESS  # what the compiled twin weighs the relative excess by

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EF7]))

    @property
    def generator(self) -> np.random.Generator:
        """The generator it draws from (a compiled run continues its stream)."""
        return self._rng

    def select(self, decision: Decision) -> int:
        return sample_near_best(decision.finish_s, decision.mask, self._rng)


def sample_near_best(score: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> int:
    """A feasible server drawn with weight ``exp(-SHARPNESS * relative excess of its score
    over the best)``: lower scores are better (``soft_eft``, ``soft_tail``)."""
    feasible = np.flatnonzero(mask)
    weights = np.exp(-SHARPNESS * relative_excess(score, mask)[feasible])
    return int(feasible[rng.choice(feasible.size, p=weights / weights.sum())])
