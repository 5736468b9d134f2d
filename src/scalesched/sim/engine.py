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

from scalesched.cache.kv import PrefixCache
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.decision.actions import Action
from scalesched.decision.features import (
    ENGINE_LOADING,
    ENGINE_READY,
    Decision,
    make_decision,
)
from scalesched.decision.scheduler import ReadyOrder, SchedulingError
from scalesched.kernel.ledger import RunLedger
from scalesched.kernel.metrics import RunRecord, window_bounds
from scalesched.kernel.records import TaskRecord
from scalesched.sim.accounts import Accounts
from scalesched.sim.branch_rides import BranchRides
from scalesched.sim.events import ARRIVE as _ARRIVE
from scalesched.sim.events import DECODE as _DECODE
from scalesched.sim.events import LAND as _LAND
from scalesched.sim.events import PREFILL_DONE as _PREFILL_DONE
from scalesched.sim.futures import FutureSampler, RedrawnTasks, redraw
from scalesched.sim.gpu_engine import SimEngine as _Engine
from scalesched.sim.kv_reuse import KvReuse
from scalesched.sim.replicas import Replicas
from scalesched.sim.residency import Residency
from scalesched.sim.tool_cache import ToolCache
from scalesched.sim.tools import ToolServers
from scalesched.workload.instance import Job, TaskInstance

_TOKEN_EPS = 1e-6


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
        warmup: int = 0,
        cooldown: int = 0,
        trace_sink: Callable[[TaskRecord], None] | None = None,
        kv_policy: str | None = None,
        tool_cache: bool = False,
        logits_cache: bool | None = None,
    ) -> None:
        super().__init__(
            tables if tables is not None else ClusterTables(cluster),
            jobs,
            record_trace=record_trace,
            trace_sink=trace_sink,
        )
        self.cluster = cluster
        self.ready_order = ready_order
        self.on_workflow_done = on_workflow_done
        t = self.tables
        n = t.n
        self.now = 0.0

        # Per-server execution state.
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
        self._nic: list[float] = t.nic_bytes_per_s.tolist()  # the same doubles, as floats
        # Per-id state of the execution; every list grows with hedged copies.
        self._est = self.per_id(0.0)
        self._cancelled = self.per_id(False, kept=True)  # stale events of cancelled copies
        self._copies: dict[int, list[int]] = {}
        self._cpu_running: set[int] = set()
        self._kv = KvReuse(self, kv_policy) if kv_policy is not None else None
        """KV state across calls (``--kv-policy``): None keeps the engines memoryless."""
        self._tool_cache = ToolCache() if tool_cache else None
        """Repeated tool calls reuse their original's result (``--tool-cache on``)."""
        self._rides = BranchRides(self, logits_cache) if logits_cache is not None else None
        """Re-sampled branches reuse their group's logits (``--logits-cache on``: True;
        False measures the branches without caching); None: branches are plain calls."""

        self.in_system = 0
        self.in_system_area = 0.0
        """Integral of the number of workflows in the system over time (workflow-seconds)."""
        # The measurement window runs from the arrival of the first to that of the last
        # measured job; busy areas and the in-system integral are read at both ends.
        self.warmup, self.cooldown = warmup, cooldown
        self.window = window_bounds(self.n_jobs, warmup, cooldown)
        """First and last measured job index (arrival order)."""
        self.accounts = Accounts(self)
        """Utilisation integrals and the measurement window's marks (``sim.accounts``)."""

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
            self._push_arrival(0)  # each arrival pushes the next (``_on_arrive``)
        self._replicas = Replicas(self)
        self._residency = Residency(self)
        self._tools = ToolServers(self)
        self._handlers: list[Callable[[int, int], None]] = [
            self._on_arrive,
            self._on_land,
            self._tools.on_cpu_done,
            self._on_task_done,
            self._on_prefill_done,
            self._on_decode,
            self._residency.on_load_done,
            self._replicas.on_release,
        ]
        if t.pinned:
            self._residency.pin_engines()

    # -- the driving interface -------------------------------------------------------
    def next_decision(self) -> Decision | None:
        """Run events until a ready task needs a server; None when everything has finished."""
        heap, pending, handlers, pop = self._heap, self.pending, self._handlers, heapq.heappop
        while True:
            if pending and (not heap or heap[0][0] > self.now):
                gid = self.pop_pending(self.ready_order)
                self._current = gid
                decision = make_decision(self.tables, self, self.request(gid, self.now))
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
            if kind == _DECODE and not self._decode_live(a, b):
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
            decision = make_decision(self.tables, self, self.request(gid, self.now))
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
            self._launch(gid, servers[0], decision)
            return
        # ``add_copy`` extends ``_est`` and ``_cancelled`` too (``per_id``)
        ids = [gid] + [self.add_copy(gid) for _ in servers[1:]]
        self._copies[gid] = ids
        for x, server in zip(ids, servers, strict=True):
            if not self._cancelled[x]:  # a copy that finished at once cancels the rest
                self._launch(x, server, decision)

    def _launch(self, gid: int, server: int, decision: Decision) -> None:
        """Send task (or copy) ``gid`` to ``server``: its inputs travel, then it lands."""
        est = float(decision.exec_s[server])
        self._est[gid] = est
        self.book(gid, server, est)
        delay = self._move_inputs(self.origin[gid], server)
        if delay > 0:
            self._push(self.now + delay, _LAND, gid, 0)
        else:
            self._on_land(gid, 0)

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
        self, sampler: FutureSampler | None = None, rng: np.random.Generator | None = None
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
        keeps its random state)."""
        memo: dict[int, object] = {id(self.cluster): self.cluster}
        for shared in self.shared_parts():
            memo[id(shared)] = shared
        if self._current_decision is not None:  # the decision refers to the tables too
            memo[id(self._current_decision.task)] = self._current_decision.task
        for box in self.flat_boxes():
            memo[id(box)] = box.copy()  # type: ignore[attr-defined]
        if self._futures is not None:  # a fork of a redrawn fork: one sampler, shared
            memo[id(self._futures.sampler)] = self._futures.sampler
        clone = copy.deepcopy(self, memo)
        clone._task = clone.tasks.of.__getitem__  # a C method: deepcopy would keep ours
        if clone._futures is not None:
            clone._task = clone._futures.task
        if sampler is not None:
            if rng is None:
                raise ValueError("fork(sampler=...) needs a seeded rng")
            redraw(clone, sampler, rng)
        return clone

    # -- helpers ---------------------------------------------------------------------
    def _push(self, time: float, kind: int, a: int, b: int) -> None:
        heapq.heappush(self._heap, (time, next(self._seq), kind, a, b))

    def _push_arrival(self, ji: int) -> None:
        """Job ``ji``'s arrival; its sequence number (negative, in job order) puts it before
        any other event of the same instant, as if every arrival had been pushed first."""
        heapq.heappush(self._heap, (self.arrival_time(ji), ji - self.n_jobs, _ARRIVE, ji, 0))

    def _move_inputs(self, gid: int, dst: int) -> float:
        ji = self.tasks.job_of[gid]
        wf = self.jobs[ji].workflow
        off = self.tasks.offset[ji]
        i = gid - off
        nic, latency, server = self._nic, self.tables.latency_s, self.server
        delay = 0.0
        for p in wf.parents[i]:
            src = server[off + p]
            nbytes = wf.edge_bytes.get((p, i), 0.0)
            if src == dst or nbytes <= 0:
                continue
            bw = min(nic[src], nic[dst])
            self.bytes_moved += nbytes
            x = latency + nbytes / bw
            if x > delay:  # max(delay, x), without the builtin's call
                delay = x
        return delay

    # -- event handlers ---------------------------------------------------------------
    def _on_arrive(self, ji: int, _: int) -> None:
        if ji + 1 < self.n_jobs:
            self._push_arrival(ji + 1)
        if ji in self.window:
            self.accounts.mark_window()
        self.in_system += 1
        self.arrive(ji, self.now)

    def _on_land(self, gid: int, _: int) -> None:
        if self._cancelled[gid]:
            return
        self.landed_at[gid] = self.now
        s = self.server[gid]
        task = self._task(gid)
        if task.kind == "llm":
            self._llm_arrive(gid, s, task)
        elif (
            task.repeat_of is not None
            and self._tool_cache is not None
            and self._tools.cache_hit(gid)
        ):
            return
        elif task.cpu_work <= 0:
            self.started_at[gid] = self.now
            self._tools.after_cpu(gid, task)
        elif self._busy_cores[s] < self._cores[s]:
            self._tools.start_tool(gid, s, task)
        else:
            self._cpu_queue[s].append(gid)

    # tools

    def _on_task_done(self, gid: int, _: int) -> None:
        if not self._cancelled[gid]:
            self._finish(gid)

    def tables_changed(self) -> None:
        """The decode tables were changed mid-run (``eval.drift``): every live engine
        re-reads them, so the change takes effect from its next step."""
        for engines in self._engines:
            for engine in engines.values():
                engine.reload_step_tables(self.tables)

    # LLM engines
    def _llm_arrive(self, gid: int, s: int, task: TaskInstance) -> None:
        m = MODEL_INDEX[task.model or ""]
        engines = self._engines[s]
        eng = engines.get(m)
        if eng is None:
            t = self.tables
            eng = _Engine(s, m, int(t.tp[s, m]), int(t.engine_class[s, m]), t)
            if self._kv is not None:
                eng.kv = PrefixCache(self._kv.eviction)
            engines[m] = eng
            self.engine_state[s, m] = ENGINE_LOADING
            self._residency.request_gpus(eng)
        eng.waiting.append(gid)
        if eng.replica_at >= 0:
            self._replicas.calls += 1
        eng.last_used = self.now
        self._set_idle(eng)
        if eng.state == ENGINE_READY:
            self._admit(eng)

    def _admit(self, eng: _Engine) -> None:
        if eng.kv is not None:
            assert self._kv is not None  # engines keep KV only in a --kv-policy run
            self._kv.admit(eng, eng.kv)
            return
        tasks_of = self._task
        waiting = eng.waiting
        while waiting:
            task = tasks_of(waiting[0])
            if not eng.fits(task.prompt_tokens, task.output_tokens):
                break  # FIFO: the head waits for a slot or memory
            gid = waiting.popleft()
            eng.admit(task.prompt_tokens, task.output_tokens)
            self.started_at[gid] = self.now
            prefill = task.prompt_tokens
            if task.resample_of is not None and self._rides is not None:
                prefill += self._rides.admit(eng, gid, task)
            self._push(self.now + eng.perf.prefill_s(prefill), _PREFILL_DONE, gid, 0)
        self._refresh_busy(eng)

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

    def _on_prefill_done(self, gid: int, _: int) -> None:
        if self._cancelled[gid]:
            return
        task = self._task(gid)
        s = self.server[gid]
        eng = self._engines[s][MODEL_INDEX[task.model or ""]]
        if eng.kv is not None:
            assert self._kv is not None  # engines keep KV only in a --kv-policy run
            self._kv.prefilled(eng.kv, gid, task)
        self._advance(eng)
        if task.resample_of is not None and self._rides is not None:
            steps, ride_end = self._rides.cache.start_decoding(gid, eng, eng.vclock)
            if ride_end is not None:  # it rides a sibling: out of the batch until ride_end
                self._rides.ride_steps[gid] = steps
                heapq.heappush(eng.marks, (ride_end, -gid - 1))
                self._reschedule(eng)
                return
            eng.start_decoding(task.prompt_tokens, task.output_tokens)
        else:
            steps = eng.start_decoding(task.prompt_tokens, task.output_tokens)
        heapq.heappush(eng.marks, (eng.vclock + steps, gid))
        self._reschedule(eng)

    def _advance(self, eng: _Engine) -> None:
        if eng.n_decoding:
            eng.vclock += (self.now - eng.last_update) / eng.step
        eng.last_update = self.now

    def _reschedule(self, eng: _Engine) -> None:
        """The batch changed: time the head request's finish. Lazily: the engine keeps one
        live decode event, and a new one is pushed only when the finish moved earlier than
        it; otherwise the live event, when it fires, re-times itself to the finish
        (``_decode_live``). The finish keeps the time and sequence number a fresh event
        would have had, so every real event is processed in the same order as pushing one
        per reschedule (which left about half of all decode events superseded)."""
        version = eng.version = next(self._seq)  # globally unique: stale events never match
        if not eng.n_decoding:
            if eng.marks:  # branches riding a sibling that stopped: they decode on their own
                assert self._rides is not None  # riders exist only with --logits-cache
                self._rides.wake_riders(eng)  # (and reschedule)
            return
        eng.step = eng.step_s()
        left = max(0.0, eng.marks[0][0] - eng.vclock)
        due = self.now + left * eng.step
        seq = next(self._seq)
        eng.due, eng.due_seq, eng.due_version = due, seq, version
        if eng.pending < 0 or due < eng.pending_at:
            key = eng.server * len(MODEL_NAMES) + eng.model
            heapq.heappush(self._heap, (due, seq, _DECODE, key, version))
            eng.pending, eng.pending_at = version, due
        else:
            self.decode_retimes += 1  # the live event will fire early and re-time itself

    def _decode_live(self, key: int, version: int) -> bool:
        """Whether a popped decode event is due (then ``_on_decode`` runs). A superseded
        one is dropped; the engine's live event firing before its due time (the batch
        changed since it was pushed) is pushed again for the due time, as it was timed."""
        eng = self._engines[key // len(MODEL_NAMES)].get(key % len(MODEL_NAMES))
        if eng is not None and version == eng.version:
            return True
        self.decode_skipped += 1
        if eng is None or version != eng.pending:
            return False  # unloaded, or superseded by an earlier finish pushed since
        if eng.due_version == eng.version:
            heapq.heappush(self._heap, (eng.due, eng.due_seq, _DECODE, key, eng.version))
            eng.pending, eng.pending_at = eng.version, eng.due
        else:
            eng.pending = -2  # the batch stopped decoding: nothing to time
        return False

    def _on_decode(self, key: int, version: int) -> None:
        s, m = divmod(key, len(MODEL_NAMES))
        eng = self._engines[s][m]
        eng.pending = -2  # this event was the live one
        self._advance(eng)
        marks = eng.marks
        if marks:
            # This event was timed for the head mark; at a large clock, rounding of
            # ``now + left * step`` can leave vclock short of it, and rescheduling would
            # land at the same instant forever. The head mark is due: finish it.
            eng.vclock = max(eng.vclock, marks[0][0])
        finished = []
        while marks and marks[0][0] <= eng.vclock + _TOKEN_EPS:
            _, gid = heapq.heappop(marks)
            if gid < 0:  # a branch's ride ends: it decodes its own tokens from here
                assert self._rides is not None  # riders exist only with --logits-cache
                self._rides.start_own_decode(eng, -gid - 1)
            else:
                finished.append(gid)
        for gid in finished:
            task = self._task(gid)
            eng.stop_decoding(task.prompt_tokens, task.output_tokens)
            if eng.kv is None:
                eng.release(task.prompt_tokens, task.output_tokens)
            else:
                assert self._kv is not None  # engines keep KV only in a --kv-policy run
                self._kv.finished(eng, eng.kv, gid, task)
            if task.resample_of is not None and self._rides is not None:
                self._rides.finished(eng, gid, task)
            eng.last_used = self.now
            self.engine_batch[s, m] -= 1
            self.engine_ctx[s, m] -= task.prompt_tokens + task.output_tokens_est // 2
        self._admit(eng)
        self._reschedule(eng)
        self._refresh_busy(eng)
        self._set_idle(eng)
        for gid in finished:
            self._finish(gid)
        if eng.idle and self._gpu_wait[s]:
            self._residency.serve_gpu_wait(s)

    def _refresh_busy(self, eng: _Engine) -> None:
        busy = eng.state == ENGINE_LOADING or eng.n_active > 0
        if busy == eng.busy:
            return
        s = eng.server
        self._gpu_area[s] += self._busy_gpus[s] * (self.now - self._gpu_mark[s])
        self._gpu_mark[s] = self.now
        self._busy_gpus[s] += eng.tp if busy else -eng.tp
        eng.busy = busy

    def _set_idle(self, eng: _Engine) -> None:
        idle = eng.state == ENGINE_READY and eng.n_requests == 0
        if idle != eng.idle:
            eng.idle = idle
            self.idle_gpus[eng.server] += eng.tp if idle else -eng.tp
            if idle and eng.replica_at >= 0:
                self._replicas.arm_release(eng)

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
            if self.done and self._replicas.loads:
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
            running = y in self._cpu_running
            if not started or running:  # its CPU part is still counted on the server
                self.cpu_backlog[s] = max(0.0, self.cpu_backlog[s] - task.cpu_work / self._speed[s])
                self.tools_in_flight[s] -= 1
            if running:
                self._cpu_running.discard(y)
                self.extra_server_seconds += self.now - self.started_at[y]
                self._tools.cpu_account(s)
                self._busy_cores[s] -= 1
                self.busy_cores[s] -= 1
                queue = self._cpu_queue[s]
                if queue:
                    nxt = queue.popleft()
                    self._tools.start_tool(nxt, s, self._task(nxt))
            elif landed and not started:
                self._cpu_queue[s].remove(y)
            return  # a copy waiting on the outside world holds nothing
        m = MODEL_INDEX[task.model or ""]
        self.engine_batch[s, m] -= 1
        self.engine_ctx[s, m] -= task.prompt_tokens + task.output_tokens_est // 2
        if not landed:
            return
        eng = self._engines[s][m]
        if not started:
            eng.waiting.remove(y)
        else:
            self.extra_server_seconds += self.now - self.started_at[y]
            if self._rides is not None and task.resample_of is not None:
                self._rides.cache.cancelled(y)
            riding = [i for i, (_, g) in enumerate(eng.marks) if g == -y - 1]
            if riding:
                eng.marks.pop(riding[0])
                heapq.heapify(eng.marks)
                assert self._rides is not None  # riders exist only with --logits-cache
                del self._rides.ride_steps[y]
            decoding = [i for i, (_, g) in enumerate(eng.marks) if g == y]
            if decoding:
                self._advance(eng)
                eng.marks.pop(decoding[0])
                heapq.heapify(eng.marks)
                eng.stop_decoding(task.prompt_tokens, task.output_tokens)
            if eng.kv is None or self._kv is None:
                eng.release(task.prompt_tokens, task.output_tokens)
            else:
                private, seg = self._kv.held.pop(y)
                eng.kv.release(seg)
                eng.release(private, 0)
            self._reschedule(eng)
        eng.last_used = self.now
        self._admit(eng)
        self._refresh_busy(eng)
        self._set_idle(eng)
        if eng.idle and self._gpu_wait[s]:
            self._residency.serve_gpu_wait(s)
