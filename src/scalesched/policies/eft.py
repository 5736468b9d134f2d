"""Earliest estimated finish time: the strong baseline.

Counts, per server, the input transfer, the wait for a core or a batch slot (work already
placed there counts, in transfer or not), the model load when the model is not resident,
the execution time at the server's current batch, and the delay the task would add to the
requests already running in that batch: the task's own finish plus what it costs others.
"""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.sim.core import CompiledDecision, eft_choice_compiled


def eft_scores(decision: Decision) -> np.ndarray:
    """(N,) eft's score of each server: estimated finish plus the delay imposed on its batch,
    inf where infeasible."""
    return np.where(decision.mask, decision.finish_s + decision.imposed_s, np.inf)


def eft_choice(decision: Decision) -> int:
    """The feasible server with the earliest finish plus imposed delay (lowest index on
    ties): eft's answer, for policies that fall back on it. A decision built on the
    compiled core is answered there (the same index: ``sim.core.eft_choice_compiled``)."""
    if type(decision) is CompiledDecision:
        at = eft_choice_compiled(decision)
        if at is not None:
            return at
    return int(np.argmin(eft_scores(decision)))


class EftScheduler(BaseScheduler):
    name = "eft"
    places_only = True  # sim.compiled_loop: answers with a server only
    compiled_policy = "eft"
    """The compiled core runs whole runs of it itself (``sim.compiled_run``)."""

    def select(self, decision: Decision) -> int:
        return eft_choice(decision)
