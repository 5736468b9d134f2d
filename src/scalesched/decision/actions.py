"""What a scheduler may answer to a decision.

* ``Place(server)``: run the task there (a plain ``int`` means the same, so a heuristic
  stays a one-liner).
* ``Hedge(servers)``: launch a copy on each server; the first copy to finish produces the
  task's result, the others are cancelled at once and release their resources. Their
  server time up to the cancellation is charged (``extra_server_seconds``).
* ``Defer()``: keep the task in the engine's global deferred queue; it is offered again at
  the next event that changes capacity (a task or CPU part finishing, a model becoming
  ready). It never starves: when nothing else is left to happen, it is offered with
  ``decision.can_defer`` False and must be placed.

Each of them may carry ``loads``: ``LoadReplica(model, server, idle_s)`` requests, carried
out with the answer, that load one more replica of a model ahead of demand (a scale-out).
A replica takes free GPUs only (it never evicts an engine nor waits for GPUs: a request
that does not fit, or names a server where the model is resident or loading, does
nothing), loads in the model's load time as a lazy load does, and is unloaded once it has
been idle for ``idle_s`` seconds: the scale-down rule of production autoscalers (Ray
Serve's ``downscale_delay_s``, KEDA's ``cooldownPeriod``, Knative's stable window), kept
by the executor because a scheduler is called only at decisions and cannot see an idle
period end. Only the simulator carries loads out; the ledger refuses them elsewhere.

``loads`` may also carry a ``Redeploy(tables)`` (``scalesched.decision.redeploy``): switch a
planned run to another deployment, its groups loaded, drained and unloaded, or resized as
``deployment_diff`` says, with load times charged. A re-planner (``runs.replan``) sends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from scalesched.decision.redeploy import Redeploy

if TYPE_CHECKING:
    from scalesched.decision.features import Decision

REPLICA_IDLE_S = 60.0
"""Default idle time before a replica is unloaded (Knative's stable window)."""


@dataclass(frozen=True, slots=True)
class LoadReplica:
    """Load one more replica of ``model`` (a catalog name) on ``server`` now; unload it once
    it has been idle (no request placed, waiting or running) for ``idle_s`` seconds."""

    model: str
    server: int
    idle_s: float = REPLICA_IDLE_S

    def __post_init__(self) -> None:
        if not self.idle_s > 0:  # also NaN
            raise ValueError(f"LoadReplica idle_s must be positive, got {self.idle_s}")


Request: TypeAlias = "LoadReplica | Redeploy"
"""What an answer's ``loads`` may carry."""


@dataclass(frozen=True, slots=True)
class Place:
    server: int
    loads: tuple[Request, ...] = ()
    priority: float | None = None
    """Admission order at the server's engine: lower first, ties and None in arrival order
    (honoured by the simulator and the Ray runtime's emulated engines)."""


@dataclass(frozen=True, slots=True)
class Hedge:
    servers: tuple[int, ...]
    loads: tuple[Request, ...] = ()

    def __post_init__(self) -> None:
        if len(self.servers) < 1 or len(set(self.servers)) != len(self.servers):
            raise ValueError("Hedge needs one or more distinct servers")


@dataclass(frozen=True, slots=True)
class Defer:
    loads: tuple[Request, ...] = ()


Action = Place | Hedge | Defer


def as_action(answer: int | Action) -> Action:
    """A scheduler's answer as an action (an ``int`` is a placement)."""
    if isinstance(answer, Place | Hedge | Defer):
        return answer
    return Place(int(answer))


def workflow_order(decision: Decision) -> float:
    """The ``Place.priority`` of workflow order (lower first): the arrival time of the
    decision's workflow, so calls of older workflows are admitted first whatever order they
    arrive in (``fcfs_workflow``; a learned policy's ordering head)."""
    return decision.now - decision.task.workflow_age
