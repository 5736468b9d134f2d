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
  first, whatever order their calls arrive in (``age_cap_s``: at most that much ahead).

They change the order only where requests queue (an engine's admission queue); placement is
exactly ``tail``'s, so a difference from ``tail`` measures ordering alone. ``placement=``
takes the servers from another policy instead (``fcfs_workflow:placement=scale-dagger``:
the learned placement with workflow-FCFS admission), since order and placement are
separate choices and under bursty arrivals the order is worth more (docs/schedulers.md).
"""

from __future__ import annotations

import math
from abc import abstractmethod

import numpy as np

from scalesched.decision.actions import Place, workflow_order
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler, Scheduler, places_only
from scalesched.policies.eft import EftScheduler
from scalesched.policies.heft_online import HeftOnlineScheduler
from scalesched.policies.kv_aware import KvAwareScheduler
from scalesched.policies.least_loaded import LeastLoadedScheduler
from scalesched.policies.p2c import PowerOfTwoScheduler
from scalesched.policies.soft_eft import SoftEftScheduler
from scalesched.policies.tail import TailScheduler
from scalesched.policies.trained import load_trained, shipped_policies
from scalesched.sim.compiled_run import TokenHeadSpec
from scalesched.workload.instance import WorkflowInstance

PLACEMENTS: dict[str, type[BaseScheduler]] = {
    "tail": TailScheduler,
    "eft": EftScheduler,
    "heft_online": HeftOnlineScheduler,
    "least_loaded": LeastLoadedScheduler,
    "kv_aware": KvAwareScheduler,
    "p2c": PowerOfTwoScheduler,
    "soft_eft": SoftEftScheduler,
}
"""The placement routers an ordering can ride on by name (the best-heuristic candidates
that only place); trained policies are taken by name or checkpoint path too."""


def placement_scores(scheduler: Scheduler, decision: Decision) -> np.ndarray:
    """(N,) ``scheduler``'s own estimate per server (lower is better): its ``scores`` where
    it has them, else the decision's finish estimate; inf where masked."""
    scores = getattr(scheduler, "scores", None)
    if scores is not None:
        return np.asarray(scores(decision), dtype=float)
    return np.where(decision.mask, decision.finish_s + decision.imposed_s, np.inf)


def placement_policy(name: str) -> Scheduler:
    """The scheduler whose servers an ordering keeps: a placement router or a trained
    policy (``ValueError`` naming what is known otherwise)."""
    if name in PLACEMENTS:
        return PLACEMENTS[name]()
    trained = load_trained(name)
    if trained is None:
        known = ", ".join([*PLACEMENTS, *sorted(shipped_policies())])
        raise ValueError(f"placement {name!r} is not a placement policy; known: {known}")
    return trained


class OrderedTail(BaseScheduler):
    """``placement``'s server (``tail``'s by default) with the priority :meth:`priority`
    gives the task."""

    name = "ordered_tail"

    def __init__(self, placement: str = "tail", placer: Scheduler | None = None) -> None:
        """``placer``: a scheduler already built to place with, named by its own name,
        instead of looking ``placement`` up (a trained policy shipped to admit in workflow
        order, :func:`scalesched.policies.trained.load_trained`)."""
        self._placer: Scheduler = placement_policy(placement) if placer is None else placer
        self.placement = placement if placer is None else placer.name

    def reset(self, seed: int) -> None:
        self._placer.reset(seed)

    def supports(self, n_servers: int) -> bool:
        return self._placer.supports(n_servers)

    def unsupported_reason(self, n_servers: int) -> str | None:
        return self._placer.unsupported_reason(n_servers)

    @abstractmethod
    def priority(self, decision: Decision) -> float:
        """Admission priority of the decision's task (lower first)."""

    @property
    def compiled_policy(self) -> str | None:
        """The order the compiled core runs whole runs of (``sim.compiled_run``): the
        ``compiled_order`` declared next to the ``priority`` in use, on ``tail``'s plain
        placement; None otherwise (another placement, or an order it does not mirror)."""
        order = None
        for cls in type(self).__mro__:
            if "priority" in vars(cls):
                order = vars(cls).get("compiled_order")
                break
        placer = getattr(self._placer, "compiled_policy", None)
        return order if self.placement == "tail" and placer == "tail" else None

    @property
    def places_only(self) -> bool:
        """Whether every answer is a placement (``sim.compiled_loop``): the placement's."""
        return places_only(self._placer)

    def workflow_lengths(self, wf: WorkflowInstance) -> list[int]:
        """The placement's output lengths (``TailScheduler.workflow_lengths``)."""
        return self._placer.workflow_lengths(wf)  # type: ignore[attr-defined,no-any-return]

    def token_head(self) -> TokenHeadSpec | None:
        """The placement's output-length head (``TailScheduler.token_head``)."""
        return self._placer.token_head()  # type: ignore[attr-defined,no-any-return]

    @property
    def record_features(self) -> bool | None:
        """The placement's attention-feature recording (a trained network's, for the
        study's feature statistics); None where it records none."""
        return getattr(self._placer, "record_features", None)

    @record_features.setter
    def record_features(self, on: bool) -> None:
        if hasattr(self._placer, "record_features"):
            self._placer.record_features = on  # type: ignore[attr-defined]

    def feature_stats(self) -> dict[int, dict[str, float]]:
        """The placement's feature statistics per N (a trained network's); empty otherwise."""
        stats = getattr(self._placer, "feature_stats", None)
        return {} if stats is None else dict(stats())

    def scores(self, decision: Decision) -> np.ndarray:
        """The placement's estimate per server (a rollout over an ordering baseline ranks
        its candidates by it); a placement without one: the decision's finish estimate."""
        return placement_scores(self._placer, decision)

    def select(self, decision: Decision) -> Place:
        answer = self._placer.select(decision)
        if isinstance(answer, Place):  # its loads go with it; the order is ours
            return Place(answer.server, answer.loads, self.priority(decision))
        if type(answer) is int or isinstance(answer, np.integer):
            return Place(int(answer), priority=self.priority(decision))
        raise TypeError(f"placement {self.placement!r} answered {answer!r}, not a server")


class PlasScheduler(OrderedTail):
    name = "plas"
    compiled_order = "plas"

    def priority(self, decision: Decision) -> float:
        return decision.task.attained_s


class ShortestRemainingScheduler(OrderedTail):
    name = "shortest_remaining"

    def priority(self, decision: Decision) -> float:
        return decision.task.rank


class FcfsWorkflowScheduler(OrderedTail):
    """Workflow order; ``age_cap_s`` caps the credit of a workflow's age, so a call goes at
    most that far ahead of its own arrival: among workflows older than the cap, calls go in
    the order they arrive, and one old workflow's fan-out cannot hold an engine's queue
    (0: the engine's own order; the default, no cap: pure workflow order)."""

    name = "fcfs_workflow"
    compiled_order = "fcfs_workflow"

    def __init__(
        self, placement: str = "tail", age_cap_s: float = math.inf, placer: Scheduler | None = None
    ) -> None:
        if not age_cap_s >= 0:
            raise ValueError(f"age_cap_s must be at least 0, got {age_cap_s}")
        super().__init__(placement, placer)
        self.age_cap_s = age_cap_s

    def priority(self, decision: Decision) -> float:
        return capped_workflow_order(decision, self.age_cap_s)

    @property
    def compiled_policy(self) -> str | None:
        """Pure workflow order only: the compiled core has no capped order."""
        return super().compiled_policy if math.isinf(self.age_cap_s) else None


def capped_workflow_order(decision: Decision, age_cap_s: float = math.inf) -> float:
    """``fcfs_workflow``'s priority of ``decision``'s call (lower first): its workflow's
    arrival time, or at most ``age_cap_s`` before the decision (the training environment
    admits a learner's calls by it too)."""
    if math.isinf(age_cap_s):
        return workflow_order(decision)
    return decision.now - min(decision.task.workflow_age, age_cap_s)


def in_admission_order(network: Scheduler, order: str, age_cap_s: float | None) -> Scheduler:
    """A trained policy acting with ``order`` (:class:`scalesched.policies.trained.
    ActingOptions`): the network itself for ``own``; for ``workflow``, ``fcfs_workflow``'s
    admission (capped at ``age_cap_s``) over its placement, under its own name."""
    if order == "own":
        return network
    cap = math.inf if age_cap_s is None else age_cap_s
    ordered = FcfsWorkflowScheduler(age_cap_s=cap, placer=network)
    ordered.name = network.name
    return ordered
