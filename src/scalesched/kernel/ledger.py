"""The bookkeeping of one run, kept once for the simulator and the Ray runtime.

A run flattens its jobs' tasks into global ids (``gid = offset[job] + index``; hedged copies
get ids past the tasks) so per-task state lives in flat containers. ``RunLedger`` owns what
both executors record the same way:

* arrivals (lower bounds, parents left to finish), readiness and the queue of tasks waiting
  for a decision (``pending``), the deferred queue with its no-starvation rule;
* completion: the result produced once, the trace row, children made ready, workflows
  finished;
* the per-server arrays behind the ``ClusterStateView`` the decisions read, which servers
  are alive, and what placing a task books on them;
* the counters and the ``RunRecord`` the metrics are computed from.

What is really theirs stays with them: the simulator's event loop and execution model
(``sim/engine.py``), the runtime's Ray orchestration and its clock (``runtime/``). Time is
passed in (``now``): the simulator's clock is a number, the runtime's the wall clock.

Two ways to hold a run's jobs (docs/simulator.md, "Streaming runs"):

* *up front*: a list of realised jobs; per-id state in lists, kept to the end (the runtime,
  and callers that read every task's record after the run);
* *streamed*: ``StreamedJobs`` (arrival times known, each job realised only when asked for)
  given to a ledger whose class allows it (``streams``). A job is realised at its arrival and
  retired when its last task finishes: its per-id state (dicts) is dropped once its queue
  delays and response time are folded into the few per-workflow numbers the metrics need
  (arrival, end, lower bound: 24 bytes) and the measured tasks' queue delays (8 bytes each).
  Same ids, same event order, same numbers as up front.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from operator import attrgetter
from typing import ClassVar, TypeAlias, TypeVar, cast, overload

import numpy as np

from scalesched.cluster.anywhere import AnyDeployment, any_deployment
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.decision.actions import Action, Defer, Hedge, Place, as_action
from scalesched.decision.features import ENGINE_ABSENT, Decision, TaskRequest
from scalesched.decision.scheduler import ReadyOrder, SchedulingError
from scalesched.kernel.metrics import RunRecord
from scalesched.kernel.ranks import VisibleRanks, deciders
from scalesched.kernel.records import TaskRecord, check_feasible, job_bounds, task_record
from scalesched.kernel.requests import task_request
from scalesched.kernel.routes import RouteMemory
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

V = TypeVar("V")
PerId: TypeAlias = list[V] | dict[int, V]
"""Per-id state: a list up front, a dict (entries dropped at retirement) when streamed."""

COPY_BASE = 2**62
"""Hedged copies of a streamed run get ids from here on: past every task, like up front."""


def _drop(box: dict[int, V], keys: Sequence[int]) -> None:
    """Delete ``keys`` from ``box`` (a C-level loop: retirement runs once per job)."""
    deque(map(box.__delitem__, keys), maxlen=0)


class StreamedJobs(Sequence[Job]):
    """A run's jobs realised on demand: every arrival time known (non-decreasing, so the
    index is the arrival order), job ``i`` built only when asked for, the same every time."""

    arrivals: np.ndarray

    @abstractmethod
    def job(self, i: int) -> Job:
        """Realise the ``i``-th job (0 <= i < len)."""

    def __len__(self) -> int:
        return int(self.arrivals.size)

    @overload
    def __getitem__(self, i: int) -> Job: ...

    @overload
    def __getitem__(self, i: slice) -> list[Job]: ...

    def __getitem__(self, i: int | slice) -> Job | list[Job]:
        n = len(self)
        if isinstance(i, slice):
            return [self.job(k) for k in range(*i.indices(n))]
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError(i)
        return self.job(k)


class StreamRanks(VisibleRanks):
    """``VisibleRanks`` for a streamed run: the same ranks, cached per job in flight only."""

    def __init__(self, tables: ClusterTables, offsets: dict[int, int], done: dict[int, bool]):
        super().__init__(tables, [], offsets, done)

    def admit(self, job: int, wf: WorkflowInstance) -> None:
        self._workflows[job] = wf
        self._deciders[job] = deciders(wf)
        self._ranks[job] = self._costs[job] = None

    def workflow_finished(self, job: int) -> None:
        for per_job in (self._workflows, self._deciders, self._ranks, self._costs):
            del per_job[job]


class RunTasks:
    """Global task ids over ``jobs`` and the per-task facts every scheduler reads."""

    def __init__(
        self, tables: ClusterTables, jobs: Sequence[Job], *, streamed: bool = False
    ) -> None:
        self.jobs = jobs
        self.streamed = streamed
        self.offset: PerId[int] = {} if streamed else []
        self.job_of: PerId[int] = {} if streamed else []
        self.local: PerId[int] = {} if streamed else []
        """Index of each id's task inside its workflow (copies share their task's)."""
        self.of: PerId[TaskInstance] = {} if streamed else []
        """Each id's task, by id (hot: one index instead of three, see ``task``)."""
        self.ranks: VisibleRanks | StreamRanks
        if streamed:
            self.n_tasks = 0
            self.done: PerId[bool] = {}
            self._next_copy = COPY_BASE
            self.ranks = StreamRanks(tables, self.offset, self.done)  # type: ignore[arg-type]
            return
        assert isinstance(self.offset, list)
        assert isinstance(self.job_of, list) and isinstance(self.local, list)
        assert isinstance(self.of, list)
        total = 0
        for ji, job in enumerate(jobs):
            self.offset.append(total)
            total += len(job.workflow.tasks)
            self.job_of.extend([ji] * len(job.workflow.tasks))
            self.local.extend(range(len(job.workflow.tasks)))
            self.of.extend(job.workflow.tasks)
        self.n_tasks = total
        """Ids below this are tasks; ids from it on are hedged copies (``add_copy``)."""
        self.done = [False] * total
        """Set by the run when a task finishes; ranks read it to know what is visible."""
        self.ranks = VisibleRanks(tables, [j.workflow for j in jobs], self.offset, self.done)

    def admit(self, ji: int, job: Job) -> range:
        """Streamed: job ``ji`` arrived; its tasks get the next ids (returned)."""
        n = len(job.workflow.tasks)
        ids = range(self.n_tasks, self.n_tasks + n)
        self.offset[ji] = self.n_tasks
        assert isinstance(self.job_of, dict) and isinstance(self.local, dict)
        assert isinstance(self.done, dict)
        self.job_of.update(dict.fromkeys(ids, ji))
        self.local.update(zip(ids, range(n), strict=True))
        assert isinstance(self.of, dict)
        self.of.update(zip(ids, job.workflow.tasks, strict=True))
        self.done.update(dict.fromkeys(ids, False))
        self.n_tasks += n
        assert isinstance(self.ranks, StreamRanks)
        self.ranks.admit(ji, job.workflow)
        return ids

    def retire(self, ids: Sequence[int], n: int, ji: int) -> None:
        """Streamed: job ``ji`` finished; forget its ids (its ``n`` tasks, then copies)."""
        assert isinstance(self.job_of, dict) and isinstance(self.local, dict)
        assert isinstance(self.done, dict)
        _drop(self.job_of, ids)
        _drop(self.local, ids)
        assert isinstance(self.of, dict)
        _drop(self.of, ids)
        _drop(self.done, ids[:n])  # copies have no entry
        del self.offset[ji]

    def task(self, gid: int) -> TaskInstance:
        return self.of[gid]

    def highest_rank(self, waiting: Iterable[int]) -> int:
        """The ``rank`` ready order's pick among ``waiting``: the highest HEFT upward rank,
        ties to the lowest id."""
        return max(waiting, key=lambda g: (self.rank(g), -g))

    def flat_boxes(self) -> list[object]:
        """Containers of plain values and immutable tasks (a fork copies them flat)."""
        return [self.offset, self.job_of, self.local, self.of, self.done, *self.ranks.flat_boxes()]

    def add_copy(self, gid: int) -> int:
        """A new id for one more copy of task ``gid`` (a hedge); returns it."""
        if isinstance(self.job_of, dict):
            x = self._next_copy
            self._next_copy += 1
            self.job_of[x] = self.job_of[gid]
            self.local[x] = self.local[gid]
            self.of[x] = self.of[gid]
            return x
        assert isinstance(self.local, list) and isinstance(self.of, list)
        self.job_of.append(self.job_of[gid])
        self.local.append(self.local[gid])
        self.of.append(self.of[gid])
        return len(self.job_of) - 1

    def rank(self, gid: int) -> float:
        ji = self.job_of[gid]
        return self.ranks.rank(ji, gid - self.offset[ji])

    def request(
        self, gid: int, servers: PerId[int], now: float, attained: np.ndarray
    ) -> TaskRequest:
        """The task as a scheduler sees it; ``servers`` holds each placed task's server,
        ``attained`` each job's service so far."""
        ji = self.job_of[gid]
        job = self.jobs[ji]
        off = self.offset[ji]
        i = gid - off
        parents = job.workflow.parents[i]
        return task_request(
            job.workflow,
            i,
            [servers[off + p] for p in parents],
            self.ranks.rank(ji, i),  # ``rank(gid)`` without finding the job again
            now - job.arrival,
            float(attained[ji]),
        )


def must_be_placed(task_id: object, who: str = "") -> SchedulingError:
    """The error for a deferral of a task offered because nothing else was left to happen
    (the no-starvation rule): every executor raises this one."""
    return SchedulingError(
        f"{who}task {task_id} cannot be deferred: nothing else is left to happen, it must be placed"
    )


class RunLedger:
    """One run's bookkeeping over ``jobs`` on the cluster of ``tables`` (see the module
    docstring). Executors extend it: ``Simulation`` and the runtime's ``RuntimeView``."""

    loaded_at: PerId[float] | None = None
    """When the engine an LLM call landed on while it was loading became ready (NaN: it
    was resident), per id: the trace's ``loaded``; kept by executors that load models
    (the simulator), None elsewhere."""

    skipped_s: PerId[float] | None = None
    """Seconds of its alone time a task skipped by reuse (cached prefill, a tool result
    taken from the cache), per id: the trace's ``skipped``; kept by a traced simulation
    with a cache on, None elsewhere."""

    streams: ClassVar[bool] = False
    """Whether this executor runs ``StreamedJobs`` streamed (else they are realised first)."""

    _job_bounds: Callable[[ClusterTables, AnyDeployment, Job], tuple[float, float]] = staticmethod(
        job_bounds
    )
    """How a job's two bounds are computed at its arrival (``kernel.records.job_bounds``); a
    simulation on the compiled core sets the compiled one, which gives the same doubles."""

    def __init__(
        self,
        tables: ClusterTables,
        jobs: Sequence[Job],
        *,
        record_trace: bool = False,
        trace_sink: Callable[[TaskRecord], None] | None = None,
    ) -> None:
        self.tables = t = tables
        self.streamed = self.streams and isinstance(jobs, StreamedJobs)
        self.jobs: Sequence[Job]
        """By job index (arrival order); streamed, a dict of the jobs in flight (indexed,
        never iterated: ``n_jobs`` and ``arrivals`` cover the whole run)."""
        self._in_flight: dict[int, Job] = {}
        if isinstance(jobs, StreamedJobs) and self.streamed:
            self.stream: StreamedJobs | None = jobs
            self.jobs = cast(Sequence[Job], self._in_flight)  # realised at arrival
            self._arrivals = np.asarray(jobs.arrivals, dtype=float)
        else:
            self.stream = None
            self.jobs = sorted(jobs, key=attrgetter("arrival", "workflow_id"))
            check_feasible(t, self.jobs)
            self._arrivals = np.array([j.arrival for j in self.jobs], dtype=float)
        self.n_jobs = int(self._arrivals.size)
        self.record_trace = record_trace or trace_sink is not None
        self._trace_sink = trace_sink
        """Where each trace row goes as its task finishes (else ``trace`` keeps them all)."""
        self.window = (0, max(self.n_jobs - 1, 0))
        """First and last measured job (arrival order); executors that measure a window set
        it. A streamed run keeps the queue delays of these jobs' tasks only."""

        # The per-server state decisions read (the ClusterStateView protocol, less ``now``).
        n, n_models = t.n, len(MODEL_NAMES)
        self.est_work = np.zeros(n)
        self.n_assigned = np.zeros(n)
        self.busy_cores = np.zeros(n)
        self.cpu_backlog = np.zeros(n)
        self.tools_in_flight = np.zeros(n)
        self.free_gpus = t.gpus.copy()
        self.idle_gpus = np.zeros(n)
        self.engine_state = np.zeros((n, n_models), dtype=np.int8)
        self.engine_ready_at = np.zeros((n, n_models))
        self.engine_batch = np.zeros((n, n_models))
        self.engine_ctx = np.zeros((n, n_models))
        self.alive = np.ones(n, dtype=bool)
        self._speed = [float(s) for s in t.core_speed]
        self.routes = RouteMemory(t)
        """What was routed where (application prompts, session contexts): the cache state
        a router can know, read by the cache features (``Decision.server_features``)."""
        self._init_books()

    def _init_books(self) -> None:
        """The run's books: per task (and hedged copy) by global id, with the queues of
        ready and deferred tasks; per job, in arrival order; the counters and the trace."""
        # Per task (and hedged copy), by global id.
        self.tasks = RunTasks(self.tables, self.jobs, streamed=self.streamed)
        total = self.n_tasks = self.tasks.n_tasks
        self._per_id: list[tuple[PerId[object], object, bool]] = []
        self._kept: tuple[PerId[object] | None, object] = (None, None)
        """The one per-id container whose entries equal to a value outlive retirement."""
        self.server: PerId[int] = self.per_id(-1)
        """Where each id was placed (-1: not yet)."""
        self.ready_at: PerId[float] = self.per_id(math.nan, copied=True)
        self.landed_at: PerId[float] = self.per_id(math.nan)
        self.started_at: PerId[float] = self.per_id(math.nan)
        self.ended_at: PerId[float] = self.per_id(math.nan)
        self.priority: PerId[float] = self.per_id(math.inf, copied=True)
        """Admission priority a ``Place`` gave each id (lower is admitted first; inf: in
        arrival order), honoured by the engines' queues."""
        self.missing: PerId[int] = {} if self.streamed else [0] * total
        """Parents of each task not finished yet."""
        self.task_done = self.tasks.done
        """Whether each task has produced its result."""
        self.origin: PerId[int] = {} if self.streamed else list(range(total))
        """The task each id is a copy of (itself for a task)."""
        self._copies_of: dict[int, list[int]] = {}
        """Streamed: the hedged copies of each job in flight (retired with it)."""
        self._queue_delays = array("d")
        """Streamed: the measured tasks' queue delays, folded in at retirement."""
        self.pending: deque[int] = deque()
        """Ready tasks waiting for a decision."""
        self.deferred: list[int] = []
        """Tasks a scheduler deferred: the global queue, offered again by
        ``release_deferred`` at every event that frees capacity."""
        self.must_place: set[int] = set()

        # Per job, in arrival order.
        n_jobs = self.n_jobs
        self.job_left: PerId[int] = (
            {} if self.streamed else [len(j.workflow.tasks) for j in self.jobs]
        )
        self.job_end: list[float] | np.ndarray = (
            np.full(n_jobs, math.nan) if self.streamed else [math.nan] * n_jobs
        )
        self.lower_bounds = np.zeros(n_jobs)
        self.any_deployment_bounds = np.zeros(n_jobs)
        """Per job: the world-independent bound (``any_deployment_lower_bound``)."""
        self._anywhere = any_deployment(self.tables.spec)
        self.attained = np.zeros(n_jobs)
        """Seconds of service each workflow's finished tasks have had (start to end): what a
        least-attained-service policy orders by (``TaskRequest.attained_s``)."""

        # Counters.
        self.events = 0
        self.decisions = 0
        self.model_loads = 0
        self.bytes_moved = 0.0
        self.tasks_completed = 0
        self.workflows_completed = 0
        self.hedged_tasks = 0
        self.extra_server_seconds = 0.0
        """Seconds cancelled hedge copies held a core (tools) or a batch slot (LLM calls)."""
        self.deferrals = 0
        self.trace: list[TaskRecord] = []

    # -- arrivals and readiness ----------------------------------------------------------
    def per_id(self, default: V, *, copied: bool = False, kept: object = None) -> PerId[V]:
        """A container of per-id state that arrivals, copies and retirement keep the size of
        the id space: a copy starts at ``default`` (at its task's value if ``copied``); a
        streamed run drops a retired id's entry unless it equals ``kept``."""
        box: PerId[V] = {} if self.streamed else [default] * self.n_tasks
        self._per_id.append((box, default, copied))  # type: ignore[arg-type]
        if kept is not None:
            self._kept = (cast("PerId[object]", box), kept)
        return box

    def shared_parts(self) -> list[object]:
        """What never changes during a run: the cluster's tables, the configurations of its
        world-independent bound, and the jobs (a list; a streamed run's source of jobs,
        which realises job ``i`` from its own seed)."""
        return [self.tables, self._anywhere, self.stream if self.streamed else self.jobs]

    def flat_boxes(self) -> list[object]:
        """Every container of per-task or per-job state that holds plain values only, for a
        fork to copy flat rather than element by element (``Simulation.fork``)."""
        boxes: list[object] = [box for box, _, _ in self._per_id]
        boxes += [self.missing, self.origin, self.job_left, self.job_end, self._in_flight]
        return boxes + self.tasks.flat_boxes()

    def arrival_time(self, ji: int) -> float:
        return float(self._arrivals[ji])

    def arrive(self, ji: int, now: float) -> None:
        """Job ``ji`` arrived: its lower bound is fixed and its root tasks are ready."""
        if self.stream is not None:
            self._admit_job(ji)
        job = self.jobs[ji]
        off = self.tasks.offset[ji]
        bounds = self._job_bounds(self.tables, self._anywhere, job)
        self.lower_bounds[ji], self.any_deployment_bounds[ji] = bounds
        for i, parents in enumerate(job.workflow.parents):
            self.missing[off + i] = len(parents)
            if not parents:
                self.make_ready(off + i, now)

    def _admit_job(self, ji: int) -> None:
        """Streamed: realise job ``ji`` and give its tasks ids and state."""
        assert self.stream is not None
        job = self.stream.job(ji)
        check_feasible(self.tables, [job])
        self._in_flight[ji] = job
        self.job_left[ji] = len(job.workflow.tasks)
        self._copies_of[ji] = []
        ids = self.tasks.admit(ji, job)
        for box, default, _ in self._per_id:
            assert isinstance(box, dict)
            box.update(dict.fromkeys(ids, default))
        assert isinstance(self.origin, dict)
        self.origin.update(zip(ids, ids, strict=True))
        self.n_tasks = self.tasks.n_tasks

    def _retire_job(self, ji: int) -> None:
        """Streamed: job ``ji`` finished. Its measured queue delays are kept (8 bytes each),
        its response time is in ``job_end``; every per-id entry of it is dropped."""
        job = self.jobs[ji]
        off = self.tasks.offset[ji]
        n = len(job.workflow.tasks)
        copies = self._copies_of.pop(ji)
        ids = [*range(off, off + n), *copies]
        first, last = self.window
        if first <= ji <= last:
            started, landed = self.started_at, self.landed_at
            self._queue_delays.extend(
                started[x] - landed[x]
                for x in ids
                if started[x] == started[x]  # not NaN
            )
        kept_box, kept = self._kept
        for box, _, _ in self._per_id:
            assert isinstance(box, dict)
            if box is kept_box:
                _drop(box, [x for x in ids if box[x] != kept])
            else:
                _drop(box, ids)
        assert isinstance(self.missing, dict) and isinstance(self.origin, dict)
        _drop(self.origin, ids)
        _drop(self.missing, ids[:n])  # copies have no entry
        self.tasks.retire(ids, n, ji)
        del self._in_flight[ji], self.job_left[ji]

    def make_ready(self, gid: int, now: float) -> None:
        self.ready_at[gid] = now
        self.pending.append(gid)

    def pop_pending(self, order: ReadyOrder) -> int:
        """The next ready task to place, taken off ``pending``: the oldest (``fifo``), or
        the highest HEFT upward rank, ties to the lowest id (``rank``). The one ready-order
        rule of every executor."""
        pending = self.pending
        if order == "fifo" or len(pending) == 1:
            return pending.popleft()
        best = self.tasks.highest_rank(pending)
        pending.remove(best)
        return best

    def request(self, gid: int, now: float) -> TaskRequest:
        """What the scheduler sees of task ``gid`` at ``now``."""
        return self.tasks.request(gid, self.server, now, self.attained)

    # -- deferral --------------------------------------------------------------------------
    def may_defer(self, gid: int) -> bool:
        return gid not in self.must_place

    def defer(self, gid: int) -> None:
        self.deferrals += 1
        self.deferred.append(gid)

    def release_deferred(self) -> None:
        """Offer the deferred tasks again (capacity was freed)."""
        if self.deferred:
            self.pending.extend(self.deferred)
            self.deferred.clear()

    def force_deferred(self) -> None:
        """Nothing else is left to happen: the deferred tasks are offered and must be placed
        (the no-starvation rule)."""
        self.must_place.update(self.deferred)
        self.release_deferred()

    def accept(
        self, gid: int, decision: Decision, answer: int | Action, who: str = ""
    ) -> tuple[int, ...]:
        """Check a scheduler's answer to the decision on task ``gid`` and count it: the
        servers to run the task on (several for a hedge), or none when it was deferred (it
        is then in ``deferred``). ``who`` prefixes the error (the scheduler's name)."""
        if isinstance(answer, int | np.integer):  # the plain placement: the hot path
            servers: tuple[int, ...] = (int(answer),)
        else:
            action = as_action(answer)
            if action.loads:  # the simulator takes them off before (Simulation.apply)
                raise SchedulingError(f"{who}replica loads (LoadReplica) need the simulator")
            if isinstance(action, Defer):
                if not decision.can_defer:
                    raise must_be_placed(self.tasks.task(gid).id, who)
                self.defer(gid)
                return ()
            servers = action.servers if isinstance(action, Hedge) else (action.server,)
            if isinstance(action, Place) and action.priority is not None:
                self.priority[gid] = action.priority
        for server in servers:
            if not (0 <= server < self.tables.n) or not decision.mask[server]:
                raise SchedulingError(
                    f"{who}server {server} cannot run task {self.tasks.task(gid).id} "
                    "(masked, dead or out of range)"
                )
        self.must_place.discard(gid)
        self.decisions += 1
        if len(servers) > 1:
            self.hedged_tasks += 1
        return servers

    # -- placement on servers ----------------------------------------------------------------
    def add_copy(self, gid: int) -> int:
        """A new id for one more copy of task ``gid`` (a hedge)."""
        x = self.tasks.add_copy(gid)
        for box, default, copied in self._per_id:
            value = box[gid] if copied else default
            if isinstance(box, dict):
                box[x] = value
            else:
                box.append(value)
        if isinstance(self.origin, dict):
            self.origin[x] = gid
            self._copies_of[self.tasks.job_of[gid]].append(x)
        else:
            self.origin.append(gid)
        return x

    def book(self, x: int, server: int, est: float) -> None:
        """Task (or copy) ``x`` goes to ``server``, ``est`` seconds of estimated execution:
        counted from placement, not landing (work in transfer is already the server's)."""
        task = self.tasks.of[x]
        self.server[x] = server
        self.est_work[server] += est
        self.n_assigned[server] += 1
        if task.kind == "tool":
            self.cpu_backlog[server] += task.cpu_work / self._speed[server]
            self.tools_in_flight[server] += 1
        else:
            m = MODEL_INDEX[task.model or ""]
            self.engine_batch[server, m] += 1
            self.engine_ctx[server, m] += task.prompt_tokens + task.output_tokens_est // 2
            if task.prefix_id is not None:
                self._route(x, server, m, task)

    def _route(self, x: int, server: int, m: int, task: TaskInstance) -> None:
        """Remember that call ``x``'s prefix and context went to ``server``."""
        tasks = self.tasks
        name = self.jobs[tasks.job_of[x]].workflow.name
        ctx = task.context_of
        self.routes.route(
            server,
            m,
            task.prefix_id or "",
            task.prefix_tokens,
            (name, tasks.local[x]),
            (name, ctx) if ctx is not None else None,
            task.prompt_tokens + task.output_tokens_est,
        )

    def unassign(self, server: int, est: float) -> None:
        """A task placed on ``server`` no longer counts there (finished, cancelled, lost)."""
        self.n_assigned[server] -= 1
        n = self.n_assigned[server]
        self.est_work[server] = self.est_work[server] - est if n > 0 else 0.0

    def mark_dead(self, server: int) -> None:
        """``server`` is gone: out of every later decision, holding nothing."""
        self.alive[server] = False
        self.routes.forget_server(server)
        for per_server in (
            self.est_work,
            self.n_assigned,
            self.cpu_backlog,
            self.busy_cores,
            self.tools_in_flight,
            self.engine_batch,
            self.engine_ctx,
            self.free_gpus,
            self.idle_gpus,
        ):
            per_server[server] = 0.0
        self.engine_state[server] = ENGINE_ABSENT

    # -- completion ------------------------------------------------------------------------
    def finish(self, x: int, end: float) -> int:
        """Task (or copy) ``x`` produced its task's result at ``end``: done, counted and
        traced (once per task); returns the task's id."""
        gid = self.origin[x]
        self.ended_at[x] = end
        start = self.started_at[x]
        if start == start:  # not NaN: it ran here (a tool's outside wait counts too)
            self.attained[self.tasks.job_of[gid]] += end - start
        self.task_done[gid] = True
        self.tasks_completed += 1
        if self.record_trace:
            (self._trace_sink or self.trace.append)(
                task_record(
                    self.jobs[self.tasks.job_of[gid]],
                    self.tasks.of[gid],
                    self.server[x],
                    (self.ready_at[gid], self.landed_at[x], self.started_at[x], end),
                    math.nan if self.loaded_at is None else self.loaded_at[x],
                    0.0 if self.skipped_s is None else self.skipped_s[x],
                )
            )
        return gid

    def release_children(self, gid: int, now: float) -> bool:
        """The DAG after task ``gid`` finished: children whose parents have all finished are
        ready. Returns whether this was the workflow's last task."""
        tasks = self.tasks
        ji = tasks.job_of[gid]
        off = tasks.offset[ji]
        i = gid - off
        tasks.ranks.task_finished(ji, i)
        for c in self.jobs[ji].workflow.children[i]:
            cg = off + c
            self.missing[cg] -= 1
            if self.missing[cg] == 0:
                self.make_ready(cg, now)
        self.job_left[ji] -= 1
        if self.job_left[ji]:
            return False
        self.job_end[ji] = now
        self.workflows_completed += 1
        tasks.ranks.workflow_finished(ji)
        if self.stream is not None:
            self._retire_job(ji)
        return True

    # -- results ---------------------------------------------------------------------------
    @property
    def arrivals(self) -> np.ndarray:
        """Per job, in arrival order."""
        return self._arrivals

    @property
    def response_times(self) -> np.ndarray:
        """Per job in arrival order (NaN for one that did not complete)."""
        return np.array(self.job_end) - self.arrivals

    @property
    def queue_delays(self) -> np.ndarray:
        """Seconds each started task (or copy) waited on its server (landing to start);
        streamed: those of the measured jobs retired so far, in retirement order."""
        if self.stream is not None:
            return np.array(self._queue_delays)
        start = np.array(self.started_at)
        ok = ~np.isnan(start)
        return start[ok] - np.array(self.landed_at)[ok]

    @property
    def queue_delay_jobs(self) -> np.ndarray | None:
        """The job index of each entry of ``queue_delays`` (None streamed: they are the
        measured jobs' already)."""
        if self.stream is not None:
            return None
        ok = ~np.isnan(np.array(self.started_at))
        return np.asarray(self.tasks.job_of, dtype=np.int64)[ok]

    def run_record(
        self,
        *,
        policy: str,
        cluster: str,
        makespan_s: float,
        utilisation: tuple[np.ndarray, np.ndarray],
        wall_s: float,
        **window: object,
    ) -> RunRecord:
        """What the metrics are computed from; ``window`` adds the steady-state fields
        (``arrivals``, ``warmup``, ``cooldown``, ...) of ``RunRecord``."""
        record = RunRecord(
            policy=policy,
            cluster=cluster,
            response_times=self.response_times,
            lower_bounds=self.lower_bounds,
            any_deployment_bounds=self.any_deployment_bounds,
            makespan_s=makespan_s,
            gpu_utilisation=utilisation[0],
            cpu_utilisation=utilisation[1],
            has_gpu=self.tables.gpus > 0,
            queue_delays=self.queue_delays,
            tasks_completed=self.tasks_completed,
            model_loads=self.model_loads,
            bytes_moved=self.bytes_moved,
            decisions=self.decisions,
            events=self.events,
            wall_s=wall_s,
            queue_delay_jobs=self.queue_delay_jobs,
            hedged_tasks=self.hedged_tasks,
            extra_server_seconds=self.extra_server_seconds,
            deferrals=self.deferrals,
            **window,  # type: ignore[arg-type]
        )
        return self.extend_record(record)

    def extend_record(self, record: RunRecord) -> RunRecord:
        """What an executor adds to the ledger's record (its own measurements); nothing here."""
        return record
