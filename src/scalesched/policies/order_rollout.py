"""``order_rollout``: which admission order a call should have, chosen per decision by
lookahead in forks of the simulation on sampled futures.

The ordering head of a learned policy (``nn.scale_net``) chooses, per call, between its
workflow's arrival order (``fcfs_workflow``'s priority) and the call's own (its priority:
now). Labelled per setting, by that setting's best heuristic, it learns one rule per kind
of setting and that rule fails on settings that look alike and want the other order
(docs/robust-training.md). This expert labels per *state*: ``fcfs_workflow`` places the
call (``tail``'s server), and where the call would wait at that server (the engine is full
or loading: only then does its priority change anything), both orders are tried in forks
of the simulation driven on by ``fcfs_workflow`` for ``horizon_s`` of a sampled future;
the cheaper wins, workflow order on ties. A one-step improvement over workflow order: the
forks' other calls keep workflow order, so "own order" means this call goes behind every
call of an older workflow, as a student's own-order call does among workflow-ordered ones.

It is an expert for training (``train.dagger``, ``learn_order``), not a router: each
contested decision costs ``2 x forks`` forks (on the compiled core where it covers the
run). Outside the simulator it answers as ``fcfs_workflow`` does, and says so once.
"""

from __future__ import annotations

from dataclasses import dataclass

from scalesched.decision.actions import Action, Place
from scalesched.decision.features import Decision
from scalesched.policies.ordering import FcfsWorkflowScheduler
from scalesched.policies.rollout import SampledRolloutScheduler


@dataclass(eq=False)
class OrderRolloutScheduler(SampledRolloutScheduler):
    """``fcfs_workflow``'s server, with the admission order (workflow or own) that costs
    less in forks on sampled futures, where the call would wait; workflow order elsewhere
    and on ties."""

    base: str = "fcfs_workflow"
    """The base, which must order by workflow (the forks go on under it)."""
    horizon_s: float = 30.0

    name = "order_rollout"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.inner, FcfsWorkflowScheduler):
            raise ValueError(f"order_rollout's base must be fcfs_workflow, got {self.base!r}")

    @staticmethod
    def contested(decision: Decision, server: int) -> bool:
        """Whether the call's priority can change anything on ``server``: it is an LLM
        call that would wait there for admission (a full or loading engine)."""
        return decision.task.kind == "llm" and bool(decision.wait_s[server] > 0)

    def select(self, decision: Decision) -> int | Action:
        answer = self.inner.select(decision)
        assert isinstance(answer, Place) and answer.priority is not None  # fcfs_workflow's
        if answer.loads or not self.contested(decision, answer.server):
            return answer
        fork = self.fork_of(decision)
        if fork is None:
            return answer
        options = [(answer.server, answer.priority), (answer.server, decision.now)]
        best = self.best_of(decision, fork, options)
        self.stats["changed"] += int(best != 0)
        return answer if best == 0 else Place(answer.server, priority=decision.now)
