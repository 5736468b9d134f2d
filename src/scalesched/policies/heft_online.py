"""HEFT made online: among tasks ready at the same instant, the one with the highest upward
rank (mean-cost critical path to the workflow's visible exit) is placed first, each on its
earliest-finish server (Topcuoglu, Hariri and Wu, 2002, applied at every ready instant)."""

from __future__ import annotations

from scalesched.decision.scheduler import ReadyOrder
from scalesched.policies.eft import EftScheduler


class HeftOnlineScheduler(EftScheduler):
    name = "heft_online"
    ready_order: ReadyOrder = "rank"
