"""The feasible server with the least outstanding estimated work (ties: lowest index)."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class LeastLoadedScheduler(BaseScheduler):
    name = "least_loaded"

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, decision.est_work, np.inf)))
