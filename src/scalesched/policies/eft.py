"""Earliest estimated finish time: the strong baseline.

Counts, per server, the input transfer, the wait for a core or a batch slot, the model load
when the model is not resident, and the execution time at the server's current batch.
"""

from __future__ import annotations

import numpy as np

from scalesched.policies.base import BaseScheduler
from scalesched.policies.features import Decision


class EftScheduler(BaseScheduler):
    name = "eft"

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, decision.finish_s, np.inf)))
