"""The feasible server with the fewest unfinished tasks assigned (join-shortest-queue)."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class ShortestQueueScheduler(BaseScheduler):
    name = "shortest_queue"
    places_only = True  # sim.compiled_loop: answers with a server only

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, decision.n_assigned, np.inf)))
