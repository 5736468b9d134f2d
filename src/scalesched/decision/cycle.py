"""The one decision cycle: ask the executor for a decision, ask the policy, apply the answer.

Every executor (the simulator, the Gymnasium environment's simulation, the Ray runtime, a
lookahead fork, the serving gateway) exposes the same two calls, and this module is the
only loop over them:

* ``next_decision()``: the next ready task's :class:`Decision`, or None. A *pulling*
  executor (the simulator) advances its clock until a task needs a server and returns None
  when the run has ended; a *pushing* executor (the Ray runtime, the gateway) returns the
  next task already waiting and None when none waits now, and calls :func:`drive` again
  when more become ready.
* ``apply(answer)``: carry out the policy's answer (a server index or an action of
  :mod:`scalesched.decision.actions`) to the decision last returned.

An executor that also offers ``next_decisions()`` / ``apply_batch()`` serves schedulers
with ``select_batch`` (every task waiting at one instant decided jointly).

Tools that need to see each decision (trace collection, drift injection, timing) wrap the
scheduler, since a wrapper is itself a :class:`~scalesched.decision.scheduler.Scheduler`;
they never copy the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scalesched.decision.actions import Action
    from scalesched.decision.features import Decision
    from scalesched.decision.scheduler import Scheduler


@runtime_checkable
class Executor(Protocol):
    """What the decision cycle drives."""

    def next_decision(self) -> Decision | None:
        """The next decision to answer; None when there is none (now, or ever)."""
        ...

    def apply(self, answer: int | Action) -> None:
        """Carry out the answer to the decision last returned by ``next_decision``."""
        ...


@runtime_checkable
class BatchExecutor(Executor, Protocol):
    """An executor that can offer every task waiting at one instant at once."""

    def next_decisions(self) -> list[Decision]:
        """Every decision of the next decision instant, built on the same state."""
        ...

    def apply_batch(self, answers: Sequence[int | Action]) -> None:
        """One answer per decision of the last ``next_decisions``, in order."""
        ...


def drive(
    executor: Executor,
    scheduler: Scheduler,
    *,
    until: Callable[[], bool] | None = None,
) -> Decision | None:
    """Run the cycle until the executor has no decision to offer, or ``until()`` holds
    when a decision is offered; returns that decision unanswered (None when there is
    none), so that another answerer (an RL agent after a heuristic warm-up) can continue.

    Schedulers with ``select_batch`` are given whole decision instants when the executor
    offers them (``BatchExecutor``) and ``until`` is not set."""
    select_batch = getattr(scheduler, "select_batch", None)
    if select_batch is not None and until is None and isinstance(executor, BatchExecutor):
        decisions = executor.next_decisions()
        while decisions:
            executor.apply_batch(select_batch(decisions))
            decisions = executor.next_decisions()
        return None
    ask, select, apply = executor.next_decision, scheduler.select, executor.apply
    decision = ask()
    while decision is not None and (until is None or not until()):
        apply(select(decision))
        decision = ask()
    return decision


class Watched:
    """``scheduler`` as it is, but each answer is shown to ``watch(decision, answer)``
    before it is applied, and the time spent choosing is summed in ``select_s``: for tools
    that record or time decisions (benchmarks, samplers) without copying the loop."""

    def __init__(
        self,
        scheduler: Scheduler,
        watch: Callable[[Decision, int | Action], None] | None = None,
    ) -> None:
        self.inner = scheduler
        self.watch = watch
        self.name = scheduler.name
        self.ready_order = scheduler.ready_order
        self.select_s = 0.0

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)

    def supports(self, n_servers: int) -> bool:
        return self.inner.supports(n_servers)

    def unsupported_reason(self, n_servers: int) -> str | None:
        return self.inner.unsupported_reason(n_servers)

    def select(self, decision: Decision) -> int | Action:
        t0 = perf_counter()
        answer = self.inner.select(decision)
        self.select_s += perf_counter() - t0
        if self.watch is not None:
            self.watch(decision, answer)
        return answer
