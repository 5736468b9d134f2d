"""The bookkeeping of one run, kept once for the simulator and the Ray runtime.

A run flattens its jobs' tasks into global ids (``gid = offset[job] + index``; hedged copies
get ids past the tasks) so per-task state lives in flat lists. ``RunLedger`` owns what both
executors record the same way:

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
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from scalesched.decision.actions import Action, Defer, Hedge, as_action
from scalesched.decision.features import (
    ENGINE_ABSENT,
    MODEL_INDEX,
    MODEL_NAMES,
    ClusterTables,
    Decision,
    TaskRequest,
    VisibleRanks,
    task_request,
)
from scalesched.decision.metrics import RunRecord
from scalesched.decision.records import SchedulingError, TaskRecord, check_feasible, lower_bound
from scalesched.workload.instance import Job, TaskInstance


class RunTasks:
    """Global task ids over ``jobs`` and the per-task facts every scheduler reads."""

    def __init__(self, tables: ClusterTables, jobs: Sequence[Job]) -> None:
        self.jobs = jobs
        self.offset: list[int] = []
        self.job_of: list[int] = []
        self.local: list[int] = []
        """Index of each id's task inside its workflow (copies share their task's)."""
        total = 0
        for ji, job in enumerate(jobs):
            self.offset.append(total)
            total += len(job.workflow.tasks)
            self.job_of.extend([ji] * len(job.workflow.tasks))
            self.local.extend(range(len(job.workflow.tasks)))
        self.n_tasks = total
        """Ids below this are tasks; ids from it on are hedged copies (``add_copy``)."""
        self.done = [False] * total
        """Set by the run when a task finishes; ranks read it to know what is visible."""
        self.ranks = VisibleRanks(tables, [j.workflow for j in jobs], self.offset, self.done)

    def task(self, gid: int) -> TaskInstance:
        return self.jobs[self.job_of[gid]].workflow.tasks[self.local[gid]]

    def add_copy(self, gid: int) -> int:
        """A new id for one more copy of task ``gid`` (a hedge); returns it."""
        self.job_of.append(self.job_of[gid])
        self.local.append(self.local[gid])
        return len(self.job_of) - 1

    def rank(self, gid: int) -> float:
        ji = self.job_of[gid]
        return self.ranks.rank(ji, gid - self.offset[ji])

    def request(self, gid: int, servers: Sequence[int], now: float) -> TaskRequest:
        """The task as a scheduler sees it; ``servers`` holds each placed task's server."""
        ji = self.job_of[gid]
        job = self.jobs[ji]
        off = self.offset[ji]
        i = gid - off
        parents = job.workflow.parents[i]
        return task_request(
            job.workflow,
            i,
            [servers[off + p] for p in parents],
            self.rank(gid),
            now - job.arrival,
        )


class RunLedger:
    """One run's bookkeeping over ``jobs`` on the cluster of ``tables`` (see the module
    docstring). Executors extend it: ``Simulation`` and the runtime's ``RuntimeView``."""

    def __init__(
        self, tables: ClusterTables, jobs: Sequence[Job], *, record_trace: bool = False
    ) -> None:
        self.tables = t = tables
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.workflow_id))
        check_feasible(t, self.jobs)
        self.record_trace = record_trace
        n, n_models = t.n, len(MODEL_NAMES)

        # The per-server state decisions read (the ClusterStateView protocol, less ``now``).
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

        # Per task (and hedged copy), by global id.
        self.tasks = RunTasks(t, self.jobs)
        total = self.n_tasks = self.tasks.n_tasks
        self.server = [-1] * total
        """Where each id was placed (-1: not yet)."""
        self.ready_at = [math.nan] * total
        self.landed_at = [math.nan] * total
        self.started_at = [math.nan] * total
        self.ended_at = [math.nan] * total
        self.missing = [0] * total
        """Parents of each task not finished yet."""
        self.task_done = self.tasks.done
        """Whether each task has produced its result."""
        self.origin = list(range(total))
        """The task each id is a copy of (itself for a task)."""
        self.pending: deque[int] = deque()
        """Ready tasks waiting for a decision."""
        self.deferred: list[int] = []
        """Tasks a scheduler deferred: the global queue, offered again by
        ``release_deferred`` at every event that frees capacity."""
        self.must_place: set[int] = set()

        # Per job, in arrival order.
        n_jobs = len(self.jobs)
        self.job_left = [len(j.workflow.tasks) for j in self.jobs]
        self.job_end = [math.nan] * n_jobs
        self.lower_bounds = np.zeros(n_jobs)

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
    def arrive(self, ji: int, now: float) -> None:
        """Job ``ji`` arrived: its lower bound is fixed and its root tasks are ready."""
        job = self.jobs[ji]
        off = self.tasks.offset[ji]
        self.lower_bounds[ji] = lower_bound(self.tables, job)
        for i, parents in enumerate(job.workflow.parents):
            self.missing[off + i] = len(parents)
            if not parents:
                self.make_ready(off + i, now)

    def make_ready(self, gid: int, now: float) -> None:
        self.ready_at[gid] = now
        self.pending.append(gid)

    def request(self, gid: int, now: float) -> TaskRequest:
        """What the scheduler sees of task ``gid`` at ``now``."""
        return self.tasks.request(gid, self.server, now)

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
            if isinstance(action, Defer):
                if not decision.can_defer:
                    raise SchedulingError(
                        f"{who}task {self.tasks.task(gid).id} cannot be deferred: nothing "
                        "else is left to happen, it must be placed"
                    )
                self.defer(gid)
                return ()
            servers = action.servers if isinstance(action, Hedge) else (action.server,)
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
        self.server.append(-1)
        self.ready_at.append(self.ready_at[gid])
        for per_id in (self.landed_at, self.started_at, self.ended_at):
            per_id.append(math.nan)
        self.origin.append(gid)
        return x

    def book(self, x: int, server: int, est: float) -> None:
        """Task (or copy) ``x`` goes to ``server``, ``est`` seconds of estimated execution:
        counted from placement, not landing (work in transfer is already the server's)."""
        task = self.tasks.task(x)
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

    def unassign(self, server: int, est: float) -> None:
        """A task placed on ``server`` no longer counts there (finished, cancelled, lost)."""
        self.n_assigned[server] -= 1
        n = self.n_assigned[server]
        self.est_work[server] = self.est_work[server] - est if n > 0 else 0.0

    def mark_dead(self, server: int) -> None:
        """``server`` is gone: out of every later decision, holding nothing."""
        self.alive[server] = False
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
        self.task_done[gid] = True
        self.tasks_completed += 1
        if self.record_trace:
            task = self.tasks.task(gid)
            self.trace.append(
                TaskRecord(
                    workflow=self.jobs[self.tasks.job_of[gid]].workflow_id,
                    task=task.id,
                    kind=task.kind,
                    model=task.model,
                    server=self.server[x],
                    ready=self.ready_at[gid],
                    landed=self.landed_at[x],
                    start=self.started_at[x],
                    end=end,
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
        return True

    # -- results ---------------------------------------------------------------------------
    @property
    def arrivals(self) -> np.ndarray:
        return np.array([j.arrival for j in self.jobs])

    @property
    def response_times(self) -> np.ndarray:
        """Per job in arrival order (NaN for one that did not complete)."""
        return np.array(self.job_end) - self.arrivals

    @property
    def queue_delays(self) -> np.ndarray:
        """Seconds each started task (or copy) waited on its server (landing to start)."""
        start = np.array(self.started_at)
        ok = ~np.isnan(start)
        return start[ok] - np.array(self.landed_at)[ok]

    @property
    def queue_delay_jobs(self) -> np.ndarray:
        """The job index of each entry of ``queue_delays``."""
        ok = ~np.isnan(np.array(self.started_at))
        return np.asarray(self.tasks.job_of)[ok]

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
        return RunRecord(
            policy=policy,
            cluster=cluster,
            response_times=self.response_times,
            lower_bounds=self.lower_bounds,
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
