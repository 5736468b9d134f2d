"""The feasible server with the least outstanding estimated work (ties: lowest index)."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class LeastLoadedScheduler(BaseScheduler):
    name = "least_loaded"
    places_only = True  # sim.compiled_loop: answers with a server only
    compiled_policy = "least_loaded"
    """The compiled core runs whole runs of it itself (``sim.compiled_run``)."""

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, decision.est_work, np.inf)))
