"""``order_rollout``: which admission order a call should have, chosen per decision by
lookahead in forks of the simulation on sampled futures.

The ordering head of a learned policy (``nn.scale_net``) chooses, per call, between its
workflow's arrival order (``fcfs_workflow``'s priority) and the call's own (first come,
first served). Labelled per setting, by that setting's best heuristic, it learns one rule
per kind of setting, and that rule fails on settings that look alike and want the other
order (docs/robust-training.md). This expert labels per *state*: the base places the call,
and where the call would wait at that server (the engine is full or loading: only then
does its priority change anything), both orders are tried in forks of the simulation
driven on by the base for ``horizon_s`` of a sampled future; the cheaper wins, the base's
own order on ties. A one-step improvement over the base's order, whose other calls keep
it in the forks:

* ``base=fcfs_workflow`` (the default): the call in workflow order, or in its own (its
  priority: now, so behind every call of an older workflow);
* ``base=tail``: the call in its own order (no priority: first come, first served), or in
  workflow order (ahead of every call placed without one).

It is an expert for training (``train.dagger``, ``learn_order``), not a router: each
contested decision costs ``2 x forks`` forks (on the compiled core where it covers the
run). Outside the simulator it answers as its base does, and says so once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from scalesched.decision.actions import Action, Place, as_action, workflow_order
from scalesched.decision.features import Decision
from scalesched.policies.ordering import FcfsWorkflowScheduler
from scalesched.policies.rollout import SampledRolloutScheduler
from scalesched.policies.tail import TailScheduler


@dataclass(eq=False)
class OrderRolloutScheduler(SampledRolloutScheduler):
    """The base's server, with the admission order (workflow or own) that costs less in
    forks on sampled futures where the call would wait; the base's order elsewhere and on
    ties."""

    base: str = "fcfs_workflow"
    """The order the forks go on in: ``fcfs_workflow`` or ``tail`` (first come, first
    served)."""
    horizon_s: float = 30.0

    name = "order_rollout"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.base not in ("fcfs_workflow", "tail") or not isinstance(
            self.inner, (FcfsWorkflowScheduler, TailScheduler)
        ):
            raise ValueError(
                f"order_rollout's base must be fcfs_workflow or tail, got {self.base!r}"
            )
        placement = ("candidates", "min_model_gb", "loads")  # rollout's options over servers
        changed = [
            f.name
            for f in fields(self)
            if f.name in placement and getattr(self, f.name) != f.default
        ]
        if changed:
            raise ValueError(
                f"order_rollout tries orders, not servers: {', '.join(changed)} do not apply"
            )

    @staticmethod
    def contested(decision: Decision, server: int) -> bool:
        """Whether the call's priority can change anything on ``server``: it is an LLM
        call that would wait there for admission (a full or loading engine)."""
        return decision.task.kind == "llm" and bool(decision.wait_s[server] > 0)

    def select(self, decision: Decision) -> int | Action:
        answer = as_action(self.inner.select(decision))
        assert isinstance(answer, Place)  # both bases only place
        if answer.loads or not self.contested(decision, answer.server):
            return answer
        fork = self.fork_of(decision)
        if fork is None:
            return answer
        server = answer.server
        other = decision.now if answer.priority is not None else workflow_order(decision)
        best = self.best_of(decision, fork, [(server, answer.priority), (server, other)])
        self.stats["changed"] += int(best != 0)
        return answer if best == 0 else Place(server, priority=other)
