"""The scheduler contract every placement policy implements.

The simulator, the Gymnasium environment and the Ray runtime all drive schedulers through
this one protocol: they build a :class:`~scalesched.decision.features.Decision` for a ready
task and ask ``select`` for a server index.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scalesched.decision.actions import Action
    from scalesched.decision.features import Decision

ReadyOrder = Literal["fifo", "rank"]


class SchedulingError(RuntimeError):
    """A scheduler broke the contract (chose a server the mask forbids, deferred a task that
    must be placed, or answered an executor that cannot carry the answer out)."""


@runtime_checkable
class Scheduler(Protocol):
    """Places one ready task at a time on a server of any cluster size."""

    name: str
    ready_order: ReadyOrder
    """How tasks that become ready at the same instant are ordered before placement:
    ``fifo`` (as they became ready) or ``rank`` (highest HEFT upward rank first)."""

    def reset(self, seed: int) -> None:
        """Start a new run; every random choice after this derives from ``seed``."""
        ...

    def supports(self, n_servers: int) -> bool:
        """Whether it can place tasks on a cluster of ``n_servers`` (a fixed-size network
        cannot)."""
        ...

    def unsupported_reason(self, n_servers: int) -> str | None:
        """One line saying why ``supports(n_servers)`` is False; None when it is True."""
        ...

    def select(self, decision: Decision) -> int | Action:
        """Return the index of a server whose ``decision.mask`` entry is True, or an action
        (``Place``, ``Hedge`` over several such servers, ``Defer``;
        ``scalesched.decision.actions``).

        A scheduler may also define ``select_batch(decisions) -> list[answer]``: it is then
        given every task waiting at a decision instant at once (decisions built on the same
        state) and answers for each, for admission and placement solved jointly."""
        ...


class BaseScheduler(ABC):
    """Defaults shared by the heuristics: FIFO order, nothing to reset, any cluster size."""

    name = "base"
    ready_order: ReadyOrder = "fifo"

    def reset(self, seed: int) -> None:
        return None

    def unsupported_reason(self, n_servers: int) -> str | None:
        """Why this scheduler has no answer on ``n_servers`` servers (None: it has one)."""
        return None

    def supports(self, n_servers: int) -> bool:
        return self.unsupported_reason(n_servers) is None

    @abstractmethod
    def select(self, decision: Decision) -> int | Action:
        """Return a server index whose ``decision.mask`` entry is True, or an action."""


def places_only(scheduler: Scheduler) -> bool:
    """Whether ``scheduler`` answers every decision with a placement (a server index or a
    ``Place`` without loads) and reads the run through its decisions only, so that an
    executor may keep everything else out of Python (``sim.compiled_loop``): the class
    that defines its ``select`` must declare
    ``places_only`` (a subclass that changes ``select`` without declaring it again may
    answer otherwise), and its value of it (a property may say False for a configuration
    that defers, hedges or loads replicas) must be true."""
    return _declares(scheduler, "places_only")


ANSWERS = frozenset({"place", "defer", "load"})
"""What a scheduler may declare it answers (``answers``): a placement (a server or a
``Place``), a ``Defer()``, and replica loads (``LoadReplica``) riding on either."""


def answers(scheduler: Scheduler) -> frozenset[str]:
    """What ``scheduler`` declares it may answer, for an executor that carries out only
    some actions and keeps the rest of the run out of Python (``sim.compiled_loop``): the
    class that defines its ``select`` declares ``answers`` (a subset of ``ANSWERS``; a
    property may depend on the configuration) or ``places_only`` (``{"place"}``); empty
    where it declares neither (it may hedge, re-deploy or read the simulation itself). A
    declaring scheduler reads the run through its decisions only."""
    for cls in type(scheduler).__mro__:
        if "select" in vars(cls):
            if "answers" in vars(cls):
                return frozenset(getattr(scheduler, "answers", ()))
            return frozenset({"place"}) if places_only(scheduler) else frozenset()
    return frozenset()


def _declares(scheduler: Scheduler, name: str) -> bool:
    """Whether the class that defines ``scheduler``'s ``select`` declares ``name`` and the
    scheduler's value of it is true."""
    for cls in type(scheduler).__mro__:
        if "select" in vars(cls):
            return name in vars(cls) and bool(getattr(scheduler, name, False))
    return False
