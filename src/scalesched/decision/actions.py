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
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Place:
    server: int


@dataclass(frozen=True, slots=True)
class Hedge:
    servers: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.servers) < 1 or len(set(self.servers)) != len(self.servers):
            raise ValueError("Hedge needs one or more distinct servers")


@dataclass(frozen=True, slots=True)
class Defer:
    pass


Action = Place | Hedge | Defer


def as_action(answer: int | Action) -> Action:
    """A scheduler's answer as an action (an ``int`` is a placement)."""
    if isinstance(answer, Place | Hedge | Defer):
        return answer
    return Place(int(answer))
