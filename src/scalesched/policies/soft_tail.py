"""tail with randomised ties: sample a server with probability proportional to
``exp(-SHARPNESS * log1p(relative excess of its tail score over the best))``.

The control for what a network distilled from ``tail`` learns (``scalesched.train.dagger``):
the network samples from its distribution instead of taking tail's argmax, which spreads
load over servers whose scores nearly tie, as ``soft_eft`` does for eft. If this
heuristic matches the distilled network, the network has learned tail plus sampling and
nothing more. Same sharpness as ``soft_eft`` (not tuned). Seeded by ``reset``.
"""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies.soft_eft import SHARPNESS, sample_near_best
from scalesched.policies.tail import TailScheduler
from scalesched.sim.compiled_run import TokenHeadSpec
from scalesched.workload.instance import WorkflowInstance


class SoftTailScheduler(BaseScheduler):
    name = "soft_tail"
    places_only = True  # sim.compiled_loop: answers with a server only
    sharpness = SHARPNESS  # what the compiled twin weighs the relative excess by

    def __init__(self) -> None:
        self._tail = TailScheduler()
        self._rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self._tail.reset(seed)
        self._rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5F7A]))

    @property
    def compiled_policy(self) -> str | None:
        """The compiled core's twin (``sim.compiled_run``): tail's scores at its output
        lengths, sampled from its generator in C++, where its tail is the plain one."""
        return "soft_tail" if self._tail.compiled_policy == "tail" else None

    @property
    def generator(self) -> np.random.Generator:
        """The generator it draws from (a compiled run continues its stream)."""
        return self._rng

    def workflow_lengths(self, wf: WorkflowInstance) -> list[int]:
        """Its tail's output lengths, asked once per workflow by the compiled core."""
        return self._tail.workflow_lengths(wf)

    def token_head(self) -> TokenHeadSpec | None:
        """Its tail's lengths in the form the compiled core computes them itself."""
        return self._tail.token_head()

    def select(self, decision: Decision) -> int:
        return sample_near_best(self._tail.scores(decision), decision.mask, self._rng)
