"""The discrete-event simulator: workflows arrive, tasks become ready, a scheduler places
them, servers execute them.

Written by hand on ``heapq`` rather than SimPy, for two reasons. The learned scheduler needs
the loop inverted (the simulator *returns* each decision instead of calling a scheduler),
which SimPy offers only by running the scheduler inside a process. And it is faster, though
modestly: the same execution model written the SimPy way takes 1.37x this engine's time
(1.49x with the same books kept), measured side by side on hetero-48
(``benchmarks/bench_simpy.py``, docs/benchmarks.md "SimPy anchor"); SimPy needs 3-4 of its
events per engine event.

Execution model (see docs/simulator.md for the why of each choice):

* A task becomes ready when its parents have finished; it is placed at once; its inputs
  then travel from each parent's server (latency + bytes / min(NIC bandwidths), free on the
  same server, no link contention); it joins the server when the last input lands.
* Tool tasks take one CPU core (FIFO queue when all are busy) for ``cpu_work / core_speed``
  seconds, then wait ``ext_latency`` seconds on the outside world holding no core.
* LLM tasks go to the server's engine for their model: one continuous-batching engine per
  resident model, on ``tp`` GPUs. A model that is not resident is loaded (weights / load
  bandwidth) after evicting least-recently-used idle engines; without enough GPUs the
  engine waits. Requests are admitted while the batch cap and the KV-cache memory allow
  (prompt + output tokens reserved), prefill for ``prefill_s(prompt)`` and then decode at
  one token per step, where a step takes ``decode_step_s(batch, sum of contexts)``. Between
  events the batch is constant, so decode progress is a fluid: a virtual token clock per
  engine advances by ``dt / step`` and each request finishes when the clock passes its mark.
* Optional state across calls: prefix caches of KV (``--kv-policy``, ``cache.kv``), the
  tool-result cache (``--tool-cache``, ``sim.tool_cache``) and the logits cache of
  re-sampled branches (``--logits-cache``, ``sim.logits_cache``: a branch riding a sibling
  leaves the decode batch until its ride ends, a mark of its own on the token clock).
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Action
from scalesched.decision.features import Decision, TaskRequest
from scalesched.decision.scheduler import ReadyOrder, SchedulingError
from scalesched.kernel.ledger import RunLedger
from scalesched.kernel.metrics import RunRecord, nominal_warmup, window_bounds
from scalesched.kernel.records import TaskRecord
from scalesched.sim.accounts import Accounts
from scalesched.sim.branch_rides import BranchRides
from scalesched.sim.core import (
    decision_builder,
    job_bounds_compiled,
    mean_task_costs_compiled,
    resolve_core,
    task_request_compiled,
)
from scalesched.sim.events import ARRIVE as _ARRIVE
from scalesched.sim.events import DECODE as _DECODE
from scalesched.sim.futures import FutureSampler, RedrawnTasks, after_fork
from scalesched.sim.gpu_engine import SimEngine as _Engine
from scalesched.sim.kv_reuse import KvReuse
from scalesched.sim.llm_serving import LlmServing
from scalesched.sim.redeploy import Redeployments
from scalesched.sim.replicas import Replicas
from scalesched.sim.residency import Residency
from scalesched.sim.tool_cache import ToolCache
from scalesched.sim.tools import ToolServers
from scalesched.sim.transfers import InputTransfers
from scalesched.workload.instance import Job


class Simulation(RunLedger):
    """One run over a list of jobs, or ``StreamedJobs`` realised as they arrive and retired
    when done (``RunLedger``). Drive it with ``next_decision`` / ``apply``.

    The run's bookkeeping (arrivals, readiness, completion, trace, the state arrays the
    decisions read, counters) is the ``RunLedger`` it extends, shared with the Ray runtime;
    this class is the event loop and the execution model."""

    streams = True

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[Job],
        *,
        ready_order: ReadyOrder = "fifo",
        record_trace: bool = False,
        tables: ClusterTables | None = None,
        on_workflow_done: Callable[[int], None] | None = None,
        warmup: int | None = 0,
        cooldown: int = 0,
        trace_sink: Callable[[TaskRecord], None] | None = None,
        kv_policy: str | None = None,
        tool_cache: bool = False,
        logits_cache: bool | None = None,
        core: str | None = None,
    ) -> None:
        """``core``: ``python`` or ``compiled`` (``sim.core``); None reads
        ``$SCALESCHED_CORE`` (default ``compiled`` where built). The same traces either way."""
        super().__init__(
            tables if tables is not None else ClusterTables(cluster),
            jobs,
            record_trace=record_trace,
            trace_sink=trace_sink,
        )
        self.cluster = cluster
        self.ready_order = ready_order
        self.on_workflow_done = on_workflow_done
        self.now = 0.0
        self.core = resolve_core(core)
        """The core this run's hot pieces run on (``sim.core``): results are the same."""
        self._make_decision = decision_builder(self.core)
        if self.core == "compiled":
            self._use_compiled_estimates()
        self._init_servers()
        self._init_state_across_calls(kv_policy, tool_cache, logits_cache)
        self._init_measurement(warmup, cooldown)
        self._init_events()
        self._init_parts()

    def _use_compiled_estimates(self) -> None:
        """The per-workflow estimates (bounds at arrival, HEFT's mean costs) on the
        compiled core: the same doubles (``sim.core``). Plain functions, so a fork (a deep
        copy) keeps them."""
        self._job_bounds = job_bounds_compiled
        self.tasks.ranks.mean_costs = mean_task_costs_compiled

    def _init_servers(self) -> None:
        """Per-server execution state (cores, engines, GPUs, busy integrals) and per-id
        state of the execution."""
        t = self.tables
        n = t.n
        self._cores = [int(c) for c in t.cores]
        self._busy_cores = [0] * n
        self._cpu_queue: list[deque[int]] = [deque() for _ in range(n)]
        self._engines: list[dict[int, _Engine]] = [{} for _ in range(n)]
        self._gpu_wait: list[deque[_Engine]] = [deque() for _ in range(n)]
        self._free_gpus = [float(g) for g in t.gpus]
        self._busy_gpus = [0.0] * n
        self._gpu_area = [0.0] * n
        self._cpu_area = [0.0] * n
        self._gpu_mark = [0.0] * n
        self._cpu_mark = [0.0] * n

        self._task = self.tasks.of.__getitem__  # hot: a C-level lookup by id
        self._futures: RedrawnTasks | None = None
        """A fork's redrawn tasks (``fork(sampler=...)``, ``sim.futures``); None: the truth."""
        # Per-id state of the execution; every list grows with hedged copies.
        self._est = self.per_id(0.0)
        self._cancelled = self.per_id(False, kept=True)  # stale events of cancelled copies
        self._copies: dict[int, list[int]] = {}
        self._cpu_running: set[int] = set()

    def _init_state_across_calls(
        self, kv_policy: str | None, tool_cache: bool, logits_cache: bool | None
    ) -> None:
        """The optional caches a call may leave for later ones (all off by default)."""
        self._kv = KvReuse(self, kv_policy) if kv_policy is not None else None
        """KV state across calls (``--kv-policy``): None keeps the engines memoryless."""
        self._tool_cache = ToolCache() if tool_cache else None
        """Repeated tool calls reuse their original's result (``--tool-cache on``)."""
        self._rides = BranchRides(self, logits_cache) if logits_cache is not None else None
        """Re-sampled branches reuse their group's logits (``--logits-cache on``: True;
        False measures the branches without caching); None: branches are plain calls."""
        reuses = (self._kv is not None and self._kv.reuse) or self._tool_cache is not None
        if reuses and self.record_trace:
            self.skipped_s = self.per_id(0.0)

    def _init_measurement(self, warmup: int | None, cooldown: int) -> None:
        """The workflows in the system and the measurement window. The window runs from the
        arrival of the first to that of the last measured job; busy areas and the in-system
        integral are read at both ends. A warm-up found after the run (None, MSER) has
        the books start at the nominal fraction (``kernel.metrics.nominal_warmup``)."""
        self.in_system = 0
        self.in_system_area = 0.0
        """Integral of the number of workflows in the system over time (workflow-seconds)."""
        self.warmup, self.cooldown = warmup, cooldown
        self.window = window_bounds(self.n_jobs, nominal_warmup(self.n_jobs, warmup), cooldown)
        """First and last job index (arrival order) of the books' window."""
        self.accounts = Accounts(self)
        """Utilisation integrals and the measurement window's marks (``sim.accounts``)."""

    def _init_events(self) -> None:
        """The event heap, holding the first arrival (each arrival pushes the next,
        ``_on_arrive``), and the decode-event counters."""
        self._heap: list[tuple[float, int, int, int, int]] = []
        self.decode_retimes = 0
        """Reschedules that pushed no event (the live one fires early and re-times)."""
        self.decode_skipped = 0
        """Decode events popped before their engine's due time: dropped (superseded by an
        earlier finish, or the engine unloaded) or re-timed. Not counted as ``events``:
        heap pops are ``events + decode_skipped``."""
        self._seq = itertools.count()
        self._current: int | None = None
        self._current_decision: Decision | None = None
        if self.n_jobs:
            self._push_arrival(0)

    def _init_parts(self) -> None:
        """The parts of the execution model, each bound to this simulation, and the table
        of event handlers (indexed by ``sim.events`` kind); a deployment's pinned engines
        are resident from time 0."""
        self._replicas = Replicas(self)
        self._redeploy = Redeployments(self)
        self._residency = Residency(self)
        self._tools = ToolServers(self)
        self._llm = LlmServing(self)
        self._transfers = InputTransfers(self)
        self._handlers: list[Callable[[int, int], None]] = [
            self._on_arrive,
            self._transfers.on_land,
            self._tools.on_cpu_done,
            self._on_task_done,
            self._llm.on_prefill_done,
            self._llm.on_decode,
            self._residency.on_load_done,
            self._replicas.on_release,
            self._redeploy.on_drained,
            self._redeploy.on_grown,
        ]
        if self.tables.pinned:
            self._residency.pin_engines()
        self._redeploy.note_held()

    # -- the driving interface -------------------------------------------------------
    def request(self, gid: int, now: float) -> TaskRequest:
        """What the scheduler sees of task ``gid`` at ``now`` (``RunLedger.request``; on
        the compiled core built in C++, an equal request of the same objects)."""
        if self.core == "compiled":
            return task_request_compiled(self.tasks, gid, self.server, now, self.attained)
        return self.tasks.request(gid, self.server, now, self.attained)

    def next_decision(self) -> Decision | None:
        """Run events until a ready task needs a server; None when everything has finished."""
        heap, pending, handlers, pop = self._heap, self.pending, self._handlers, heapq.heappop
        decode_live = self._llm.decode_live
        while True:
            if pending and (not heap or heap[0][0] > self.now):
                gid = self.pop_pending(self.ready_order)
                self._current = gid
                decision = self._make_decision(self.tables, self, self.request(gid, self.now))
                decision.can_defer = self.may_defer(gid)
                self._current_decision = decision
                return decision
            if not heap:
                if self.deferred:  # nothing left to happen: deferred tasks must be placed now
                    self.force_deferred()
                    continue
                self._current = None
                return None
            time, _, kind, a, b = pop(heap)
            if kind == _DECODE and not decode_live(a, b):
                continue  # nothing happens at this instant: the clock does not stop here
            if time > self.now:
                self.in_system_area += self.in_system * (time - self.now)
                self.now = time
            self.events += 1
            handlers[kind](a, b)

    def next_decisions(self) -> list[Decision]:
        """Every task waiting for a server at the next decision instant, each with its
        decision built on the same state: for schedulers that decide them jointly
        (``select_batch``). Empty when everything has finished."""
        first = self.next_decision()
        if first is None:
            return []
        batch = [(self._current, first)]
        while self.pending:
            gid = self.pop_pending(self.ready_order)
            decision = self._make_decision(self.tables, self, self.request(gid, self.now))
            decision.can_defer = self.may_defer(gid)
            batch.append((gid, decision))
        self._batch = batch
        return [d for _, d in batch]

    def apply_batch(self, answers: Sequence[int | Action]) -> None:
        """Carry out one answer per decision of the last ``next_decisions``, in order."""
        batch = getattr(self, "_batch", None)
        if not batch or len(answers) != len(batch):
            raise SchedulingError("apply_batch() needs one answer per decision of the batch")
        self._batch = []
        for (gid, decision), answer in zip(batch, answers, strict=True):
            self._current, self._current_decision = gid, decision
            self.apply(answer)

    def apply(self, answer: int | Action) -> None:
        """Carry out the answer to the last decision: place the task on a server, hedge it
        on several, or defer it (``scalesched.decision.actions``)."""
        if type(answer) is not int and getattr(answer, "loads", None):
            self._replicas.apply_with_loads(answer)  # type: ignore[arg-type]
            return
        gid, decision = self._current, self._current_decision
        if gid is None or decision is None:
            raise SchedulingError("apply() called without a pending decision")
        servers = self.accept(gid, decision, answer)
        self._current = self._current_decision = None
        if not servers:  # deferred
            return
        if len(servers) == 1:
            self._transfers.launch(gid, servers[0], decision)
            return
        # ``add_copy`` extends ``_est`` and ``_cancelled`` too (``per_id``)
        ids = [gid] + [self.add_copy(gid) for _ in servers[1:]]
        self._copies[gid] = ids
        for x, server in zip(ids, servers, strict=True):
            if not self._cancelled[x]:  # a copy that finished at once cancels the rest
                self._transfers.launch(x, server, decision)

    @property
    def current_task(self) -> int | None:
        """Id of the task the last ``next_decision`` asked about, until ``apply``; None
        otherwise. Read-only, for tools that join decisions to the trace (``predict``)."""
        return self._current

    @property
    def events_pending(self) -> int:
        """Events in the heap now (benchmarks read the heap's peak)."""
        return len(self._heap)

    @property
    def done(self) -> bool:
        return self.workflows_completed == self.n_jobs

    # -- lookahead ---------------------------------------------------------------------
    def fork(
        self,
        sampler: FutureSampler | None = None,
        rng: np.random.Generator | None = None,
        *,
        shared: bool = False,
    ) -> Simulation:
        """A copy of this running simulation that continues exactly as this one would under
        the same answers, and shares nothing that either of them changes. With a
        ``sampler`` (and a seeded ``rng``), the copy continues instead on a sampled future:
        what a scheduler cannot know yet is redrawn in it (``scalesched.sim.futures``).

        What never changes during a run is shared, not copied: the cluster and its tables,
        the jobs and their realised workflows and tasks (a streamed run realises workflow
        ``i`` from its own seed, so sharing the stream is safe). Per-task state holds plain
        numbers and is copied flat; the rest (engines, queues, caches, the event heap, the
        parts) is deep-copied, with every part bound to the copy. A policy that is asked
        to decide in the copy must be a fork of its own (``copy.deepcopy`` of a scheduler
        keeps its random state).

        ``shared=True`` gives instead a copy for the compiled core to take over and never
        to run (``sim.compiled_run.adopted``, which changes nothing it reads): it shares
        this simulation's state, and only what a sampled future's redraw changes (the
        event heap, the arrival times, the job list) is its own. The same future as a full
        fork from the same ``rng``, without the deep copy (about 15% of a sampled
        ``rollout`` decision)."""
        if shared:
            view = copy.copy(self)
            view._heap = list(self._heap)
            view.tasks = copy.copy(self.tasks)
            return after_fork(view, sampler, rng)  # type: ignore[no-any-return]
        memo: dict[int, object] = {id(self.cluster): self.cluster}
        for part in self.shared_parts():
            memo[id(part)] = part
        if self._current_decision is not None:  # the decision refers to the tables too
            memo[id(self._current_decision.task)] = self._current_decision.task
        for box in self.flat_boxes():
            memo[id(box)] = box.copy()  # type: ignore[attr-defined]
        if self._futures is not None:  # a fork of a redrawn fork: one sampler, shared
            memo[id(self._futures.sampler)] = self._futures.sampler
        clone = copy.deepcopy(self, memo)
        clone._task = clone.tasks.of.__getitem__  # a C method: deepcopy would keep ours
        return after_fork(clone, sampler, rng)  # type: ignore[no-any-return]

    # -- helpers ---------------------------------------------------------------------
    def _push(self, time: float, kind: int, a: int, b: int) -> None:
        heapq.heappush(self._heap, (time, next(self._seq), kind, a, b))

    def _push_arrival(self, ji: int) -> None:
        """Job ``ji``'s arrival; its sequence number (negative, in job order) puts it before
        any other event of the same instant, as if every arrival had been pushed first."""
        heapq.heappush(self._heap, (self.arrival_time(ji), ji - self.n_jobs, _ARRIVE, ji, 0))

    # -- event handlers ---------------------------------------------------------------
    def _on_arrive(self, ji: int, _: int) -> None:
        if ji + 1 < self.n_jobs:
            self._push_arrival(ji + 1)
        if ji in self.window:
            self.accounts.mark_window()
        self.in_system += 1
        self.arrive(ji, self.now)

    def _on_task_done(self, gid: int, _: int) -> None:
        if not self._cancelled[gid]:
            self._finish(gid)

    def held_gpu_seconds(self, start: float, end: float) -> float:
        """GPU-seconds the run's engines held (resident, loading or draining) from ``start``
        to ``end`` seconds: GPUs x time. A planned run holds its deployment's GPUs
        throughout unless a ``Redeploy`` changes them (``sim.redeploy``)."""
        return self._redeploy.held_gpu_seconds(start, end)

    def tables_changed(self) -> None:
        """The decode tables were changed mid-run (``eval.drift``): every live engine
        re-reads them, so the change takes effect from its next step."""
        self._llm.tables_changed()

    def extend_record(self, record: RunRecord) -> RunRecord:
        """The simulator's own measurements, where the run had them: replicas, the tool
        cache, the logits cache and the KV policy's figures."""
        if self._replicas.requests:
            record = dataclasses.replace(record, replicas=self._replicas.record(self.now))
        if self._tool_cache is not None:
            record = dataclasses.replace(record, tool_cache=self._tool_cache.record())
        if self._rides is not None:
            record = dataclasses.replace(record, logits=self._rides.cache.record())
        if self._kv is None:
            return record
        evicted = self._kv.lost + sum(
            e.kv.evicted for engines in self._engines for e in engines.values() if e.kv
        )
        return dataclasses.replace(record, kv=self._kv.record(evicted))

    # completion
    def _finish(self, x: int) -> None:
        """Task (or copy) ``x`` produced the task's result; its other copies are cancelled."""
        gid = self.finish(x, self.now)
        self.unassign(self.server[x], self._est[x])
        copies = self._copies.pop(gid, None)
        if copies is not None:
            for y in copies:
                if y != x:
                    self._cancel(y)
        self.release_deferred()
        if self.release_children(gid, self.now):
            self.in_system -= 1
            if self.done and (self._replicas.loads or self._redeploy.requests):
                self._replicas.drop_events()
            if self.on_workflow_done is not None:
                self.on_workflow_done(self.workflows_completed)

    def _cancel(self, y: int) -> None:
        """Stop copy ``y`` wherever it is (in transfer, queued, running, decoding) and give
        back what it holds; its pending events are ignored from now on."""
        self._cancelled[y] = True
        s, task = self.server[y], self._task(y)
        if s < 0:
            return  # not launched yet (a sibling finished while the hedge was launching)
        self.unassign(s, self._est[y])
        landed, started = not math.isnan(self.landed_at[y]), not math.isnan(self.started_at[y])
        if task.kind == "tool":
            self._tools.cancel(y, s, task, landed, started)
        else:
            self._llm.cancel(y, s, task, landed, started)
