"""Admission-order baselines from agentic serving: ``tail``'s placement, plus a priority on
each ``Place`` that orders the engine's queue (lower first).

* ``plas``: program-level least attained service (Autellix's PLAS, Luo et al., 2025): the
  call of the workflow that has had the least service so far goes first, so short programs
  are not stuck behind long ones whose lengths nobody knows in advance.
* ``shortest_remaining``: the workflow with the least predicted work left goes first
  (shortest remaining processing time over the workflow's critical path, the rule that
  Hermes approximates with Gittins indices). The prediction is the task's HEFT upward
  rank (``TaskRequest.rank``), an estimate, never the truth.
* ``fcfs_workflow``: program-level first come, first served: calls of older workflows go
  first, whatever order their calls arrive in.

They change the order only where requests queue (an engine's admission queue); placement is
exactly ``tail``'s, so a difference from ``tail`` measures ordering alone.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np

from scalesched.decision.actions import Place
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies.tail import TailScheduler


class OrderedTail(BaseScheduler):
    """``tail``'s server with the priority :meth:`priority` gives the task."""

    name = "ordered_tail"

    def __init__(self) -> None:
        self._tail = TailScheduler()

    def reset(self, seed: int) -> None:
        self._tail.reset(seed)

    @abstractmethod
    def priority(self, decision: Decision) -> float:
        """Admission priority of the decision's task (lower first)."""

    def scores(self, decision: Decision) -> np.ndarray:
        """``tail``'s estimate per server: the placement is tail's (a rollout over an
        ordering baseline ranks its candidates by it)."""
        return self._tail.scores(decision)

    def select(self, decision: Decision) -> Place:
        answer = self._tail.select(decision)
        server = answer.server if isinstance(answer, Place) else int(answer)
        return Place(server, priority=self.priority(decision))


class PlasScheduler(OrderedTail):
    name = "plas"

    def priority(self, decision: Decision) -> float:
        return decision.task.attained_s


class ShortestRemainingScheduler(OrderedTail):
    name = "shortest_remaining"

    def priority(self, decision: Decision) -> float:
        return decision.task.rank


class FcfsWorkflowScheduler(OrderedTail):
    name = "fcfs_workflow"

    def priority(self, decision: Decision) -> float:
        return decision.now - decision.task.workflow_age  # the workflow's arrival time
