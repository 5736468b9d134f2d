"""The decision cycle on the compiled core's event loop: a Python policy answers every
decision while the events between decisions (arrivals, transfers, tool cores, the LLM
engines, residency, the books) run in C++ (``EventRun``, ``sim/_core/event_core.hpp``).

For the policies the core has no twin of (a SCALE network, ``soft_tail``, ``random``,
``tao``...), C++ runs the events and stops at each decision. :class:`CompiledLoop` is an
executor of the one decision cycle (``decision.cycle``: ``next_decision``/``apply`` and the
batch pair), so ``drive`` and the Gymnasium environment use it as they use a
``Simulation``, and the run is the Python engine's event for event (the same events,
sequence numbers and doubles: ``tests/sim/test_compiled_loop.py``).

What a decision reads stays where the Python engine keeps it: the per-server arrays are the
simulation's own numpy arrays, written in place by the C++ run; the task request is built
from the simulation's task book (``Simulation.request``), whose servers, finished flags and
HEFT ranks this loop keeps current (a placement's server and its router memory here, a
finished task through ``EventRun.on_finished``), and its clock and counters (``now``,
``in_system_area``, ``events``, ``decisions``) are current at every decision. When the run
ends the rest of the C++ books are written back into the ``Simulation`` (``compiled_run``),
as after a whole C++ run.

What it covers: what ``compiled_run`` covers (a fresh simulation on the compiled core,
either ready order, up front or streamed: a streamed job enters and leaves the Python task
book as it arrives and finishes in C++; KV reuse and the tool cache; not the logits cache),
and a scheduler whose class declares what it answers next to its ``select``
(``decision.scheduler.answers``): ``places_only`` (a server or a ``Place``, with or without
a priority), or ``answers`` naming ``defer`` (the deferred queue and its no-starvation rule
are kept in C++) and ``load`` (``LoadReplica`` on an answer: replicas, their release timers
and the ``replica_*`` books in C++) besides ``place``. It reads the run only through its
decisions (the simulation's event heap, engines and books other than the view's arrays are
the C++ run's until it ends: no ``fork()``). Hedges and re-deployments, and anything else,
run the Python loop (``loop_unsupported`` says why).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.decision.actions import Defer, LoadReplica, Place
from scalesched.decision.cycle import drive
from scalesched.decision.scheduler import ANSWERS, SchedulingError, answers
from scalesched.kernel.ledger import must_be_placed
from scalesched.sim.compiled_run import (
    POLICIES,
    RANKED_AT_TAIL,
    _bind,
    _output_lengths,
    _write_back,
    compiled_policy,
    generator_in,
    generator_out,
    uncovered_state,
)
from scalesched.sim.core import request_builder
from scalesched.sim.replicas import check_loads

if TYPE_CHECKING:
    from scalesched.decision.actions import Action
    from scalesched.decision.features import Decision
    from scalesched.decision.scheduler import Scheduler
    from scalesched.sim.engine import Simulation


def loop_unsupported(sim: Simulation, scheduler: Scheduler | None = None) -> str | None:
    """Why ``sim`` cannot run its events in C++ with ``scheduler`` answering in Python
    (None: it can). Without a scheduler, only the simulation is checked (an environment
    whose agent answers with server indices)."""
    if sim.events or sim.decisions or sim.now or sim.pending or sim._current is not None:
        return "the simulation is already under way"
    if scheduler is not None:
        declared = answers(scheduler)
        if not declared:
            return f"policy {scheduler.name!r} does not declare what it answers"
        if not declared <= ANSWERS:
            return f"policy {scheduler.name!r} may answer {sorted(declared - ANSWERS)}"
    return uncovered_state(sim)


class CompiledLoop:
    """An executor over ``sim`` whose events run in C++: ``next_decision`` runs them until
    a task needs a server and returns its ``Decision`` (built on the compiled core from
    the simulation's arrays, as ``Simulation.next_decision`` builds it); ``apply`` places
    it. The caller has checked ``loop_unsupported``. ``finish()`` writes the run back into
    ``sim``; ``next_decision`` does so itself when the run has ended."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self._run = _bind(sim, book=True)
        self._batch: list[tuple[int, Decision]] = []
        self._finished_run = False
        # What each decision reads, looked up once (a decision costs ~100 us in all).
        self._request = request_builder().request
        self._make_decision, self._tables = sim._make_decision, sim.tables
        self._tasks, self._of, self._servers = sim.tasks, sim.tasks.of, sim.server
        self._attained, self._n = sim.attained, sim.tables.n

    @property
    def now(self) -> float:
        return self.sim.now

    @property
    def in_system_area(self) -> float:
        return self.sim.in_system_area

    def _decision(self, gid: int) -> Decision:
        """``Simulation.next_decision``'s decision on task ``gid``, now."""
        sim = self.sim
        rank = self._run.rank_of(gid)  # the core's HEFT rank: the book's, kept in C++
        request = self._request(self._tasks, gid, self._servers, sim.now, self._attained, rank)
        decision = self._make_decision(self._tables, sim, request)
        decision.can_defer = self._run.may_defer(gid)
        return decision

    def warm_up(self, scheduler: Scheduler, until_s: float) -> Decision | None:
        """``drive(self, scheduler, until=now >= until_s)``: ``scheduler`` places every
        decision before ``until_s`` and the first one at or after it is returned unanswered
        (an environment's warm-up); whole in C++ where the core has its twin."""
        policy = compiled_policy(scheduler)
        if policy is None or self.sim.decisions:
            sim = self.sim
            return drive(self, scheduler, until=lambda: sim.now >= until_s)
        lengths = _output_lengths(self._run, scheduler) if policy in RANKED_AT_TAIL else None
        generator_in(self._run, scheduler)
        for gid, server in self._run.run_until(POLICIES.index(policy), lengths, until_s):
            self._book(gid, server)
        generator_out(self._run, scheduler)
        return self.next_decision()

    def next_decision(self) -> Decision | None:
        """The next task's decision; None once everything has finished (the run is then
        written back into the simulation)."""
        run, sim = self._run, self.sim
        gid = run.next_ready(math.inf)
        sim.now, sim.in_system_area, sim.events, sim.decisions = run.clock()
        if gid < 0:
            self.finish()
            return None
        decision = self._decision(gid)
        self._batch = [(gid, decision)]
        return decision

    def next_decisions(self) -> list[Decision]:
        """Every task waiting at the next decision instant, each decision built on the same
        state (``Simulation.next_decisions``)."""
        run, sim = self._run, self.sim
        gids = run.next_instant(math.inf)
        sim.now, sim.in_system_area, sim.events, sim.decisions = run.clock()
        if not gids:
            self.finish()
            return []
        self._batch = [(gid, self._decision(gid)) for gid in gids]
        return [d for _, d in self._batch]

    def apply(self, answer: int | Action) -> None:
        """Place the last decision's task where ``answer`` says."""
        batch, self._batch = self._batch, []
        if len(batch) != 1:
            raise SchedulingError("apply() called without a pending decision")
        self._place(*batch[0], answer)

    def apply_batch(self, answers: Sequence[int | Action]) -> None:
        """One answer per decision of the last ``next_decisions``, in order."""
        batch, self._batch = self._batch, []
        if not batch or len(answers) != len(batch):
            raise SchedulingError("apply_batch() needs one answer per decision of the batch")
        for (gid, decision), answer in zip(batch, answers, strict=True):
            self._place(gid, decision, answer)

    def _place(self, gid: int, decision: Decision, answer: int | Action) -> None:
        """``Simulation.apply`` of a placement or a deferral, with any replica loads it
        carries: checked as ``RunLedger.accept`` checks it, the Python book's server and
        router memory kept (``RunLedger.book``), the rest in C++."""
        if type(answer) is int:
            self._launch(gid, decision, answer, math.nan)
            return
        if isinstance(answer, np.integer):
            self._launch(gid, decision, int(answer), math.nan)
            return
        loads = getattr(answer, "loads", ())
        if type(answer) not in (Place, Defer) or not all(
            type(load) is LoadReplica for load in loads
        ):
            raise SchedulingError(
                f"the compiled loop carries out placements, deferrals and replica loads only, "
                f"got {answer!r} (a scheduler that may answer otherwise must not declare "
                "places_only or answers)"
            )
        check_loads(list(loads), self.sim.tables)
        if isinstance(answer, Place):
            priority = math.nan if answer.priority is None else float(answer.priority)
            self._launch(gid, decision, answer.server, priority)
        elif not decision.can_defer:
            raise must_be_placed(self._of[gid].id)
        else:
            self._run.defer(gid)
        for load in loads:
            self._run.load_replica(load.server, MODEL_INDEX[load.model], float(load.idle_s))

    def _launch(self, gid: int, decision: Decision, server: int, priority: float) -> None:
        """The task goes to ``server`` (checked as ``RunLedger.accept`` checks it)."""
        if not (0 <= server < self._n) or not decision.mask[server]:
            raise SchedulingError(
                f"server {server} cannot run task {self._of[gid].id} (masked, dead or out of range)"
            )
        self._book(gid, server)
        self._run.apply(gid, server, float(decision.exec_s[server]), priority)

    def _book(self, gid: int, server: int) -> None:
        """What ``RunLedger.book`` keeps in Python that a later request reads: the task's
        server (its children's inputs) and the router's memory (the cache features)."""
        self._servers[gid] = server
        task = self._of[gid]
        if task.prefix_id is not None and task.kind == "llm":
            self.sim._route(gid, server, MODEL_INDEX[task.model or ""], task)

    def finish(self) -> None:
        """Write the run back into the simulation (once, at its end)."""
        if not self._finished_run:
            self._finished_run = True
            _write_back(self.sim, self._run)


def run_loop(sim: Simulation, scheduler: Scheduler) -> bool:
    """Run ``sim`` to its end with ``scheduler`` answering every decision and the events
    in C++; False (nothing run) where ``loop_unsupported`` says why."""
    if loop_unsupported(sim, scheduler) is not None:
        return False
    loop = CompiledLoop(sim)
    drive(loop, scheduler)
    loop.finish()
    return True
