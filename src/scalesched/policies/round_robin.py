"""Cycle through the servers, skipping those that cannot run the task."""

from __future__ import annotations

import numpy as np

from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler


class RoundRobinScheduler(BaseScheduler):
    name = "round_robin"
    places_only = True  # sim.compiled_loop: answers with a server only

    def __init__(self) -> None:
        self._next = 0

    def reset(self, seed: int) -> None:
        self._next = 0

    def select(self, decision: Decision) -> int:
        n = decision.n_servers
        start = self._next % n
        order = np.concatenate((decision.mask[start:], decision.mask[:start]))
        choice = (start + int(np.argmax(order))) % n
        self._next = choice + 1
        return choice
