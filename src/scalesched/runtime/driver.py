"""The driver: workflows arrive, their ready tasks are placed by a scheduler on Ray nodes,
results come back with ``ray.wait``.

Only ready tasks are submitted, each to the node the policy picked (hard node affinity via
the node's agent, see ``agent.py``), so Ray never chooses a placement. The run's bookkeeping
(arrivals, readiness, completion, trace, run record, the state arrays the decisions read) is
the ``RunLedger`` shared with the simulator, extended with the wall clock as ``RuntimeView``
(``self.view``); the driver is the Ray orchestration around it.

Faults:

* a task attempt that raises is placed again by the policy, up to ``max_retries`` times;
  then its workflow is reported failed with the error;
* a server whose agent died (with its node, or alone: agents are never restarted), or
  whose node Ray reports dead, is removed from every later decision's mask, and its
  in-flight tasks are placed again by the policy on the live servers (this does not use
  up retries); a task that no live server can run fails its workflow;
* every submitted workflow ends completed or failed: the run ends when none is open.

Actions (``scalesched.decision.actions``), as in the simulator:

* ``Hedge(servers)``: a copy runs for real on each server; the first to finish produces
  the task's result, the others are cancelled on their agents (``ServerAgent.cancel``: they
  give back core, batch slot and KV memory) and the seconds they held them are charged
  (``hedged_tasks``, ``extra_server_seconds``). A copy that fails while another still runs
  is dropped (no retry is used up); the last one fails as an unhedged task does.
* ``Defer()``: the task waits in ``view.deferred`` (the ledger's global queue) and is offered again
  at the next result (each frees capacity). It never starves: with nothing in flight and
  no arrival left, it is offered with ``decision.can_defer`` False and must be placed.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from scalesched.cluster.deployment import Deployment
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.actions import Action
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision, make_decision
from scalesched.decision.scheduler import Scheduler, SchedulingError
from scalesched.kernel.metrics import run_metrics
from scalesched.kernel.records import TaskRecord
from scalesched.runtime.agent import FaultConfig, TaskSpec
from scalesched.runtime.view import RuntimeView
from scalesched.workload.instance import Job, TaskInstance

Vehicle = Literal["actor", "task"]
Placement = Literal["policy", "ray"]
LOST_NODE_WAIT_S = 10.0
"""How long a failed call waits for Ray to confirm its node is dead before the failure is
counted against the task instead."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How a workload runs on the cluster."""

    time_scale: float = 0.05
    """Wall seconds per model second for emulated work (0.01: a 30 s request takes 0.3 s)."""
    max_retries: int = 2
    """Extra attempts of a task that raised, each placed again by the policy."""
    llm_backend: Literal["emulated", "http"] = "emulated"
    endpoints: dict[str, Any] | None = None
    """Model -> ``backends.EndpointConfig`` for the ``http`` backend."""
    faults: FaultConfig = field(default_factory=FaultConfig)
    record_trace: bool = True
    vehicle: Vehicle = "actor"
    """``actor``: a task is a call of the chosen node's agent. ``task``: a Ray task pinned
    to the node (or, with ``placement="ray"``, left to Ray), which then calls the agent of
    the node it landed on (benchmarks: the same emulation under Ray's own scheduling)."""
    placement: Placement = "policy"
    """``ray``: no policy; Ray's default scheduler places each task (``vehicle="task"``)."""
    agent_namespace: str = "scalesched"
    deployment: Deployment | None = None
    """Pinned replicas (``scalesched.cluster.deployment``) instead of dynamic loading; pass
    the run the same deployment's ``ClusterTables`` so routing follows it."""


@dataclass
class WorkflowFailure:
    workflow: int
    name: str
    task: str
    error: str


@dataclass
class RuntimeResult:
    """Metrics of one run (the keys of ``simulate --json`` plus ``workflows_failed``)."""

    metrics: dict[str, float | int | str]
    response_times: np.ndarray
    """Per workflow (NaN for a failed one), model seconds."""
    lower_bounds: np.ndarray
    server_names: list[str]
    trace: list[TaskRecord]
    failures: list[WorkflowFailure]
    dead_servers: list[str]
    replaced: int
    """Task attempts placed again because their node died."""
    lost_at: dict[str, float]
    """Dead server -> model time at which the driver learned of it."""
    retries: int
    """Task attempts placed again because they raised."""
    decision_s: float
    """Wall seconds spent building decisions and running the policy."""
    dispatch_s: float
    """Wall seconds spent submitting tasks to Ray."""
    outputs: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Python workflows: workflow id -> {task id: value} of their sink tasks."""


@dataclass(frozen=True)
class PyCall:
    """A Python task of the decorator API: ``fn(*args)``, where an ``int`` wrapped in
    ``ParentValue`` is replaced by the value of that parent task."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


@dataclass(frozen=True)
class ParentValue:
    index: int


@dataclass
class _Attempt:
    gid: int
    server: int
    est: float
    spec: TaskSpec
    value_ref: Any


class Driver:
    """One run of ``jobs`` on a connected Ray cluster (``ray.init`` done by the caller)."""

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[Job],
        scheduler: Scheduler | None,
        config: RuntimeConfig | None = None,
        *,
        seed: int = 0,
        tables: ClusterTables | None = None,
        programs: dict[int, dict[int, PyCall]] | None = None,
        on_task_done: Callable[[Driver], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.config = config or RuntimeConfig()
        cfg = self.config
        if cfg.time_scale <= 0:
            from scalesched.errors import InputError

            raise InputError("--time-scale", "time_scale", "must be positive")
        if cfg.placement == "ray" and cfg.vehicle != "task":
            raise ValueError("placement='ray' needs vehicle='task'")
        if cfg.placement == "policy" and scheduler is None:
            raise ValueError("a scheduler is needed unless placement='ray'")
        self.tables = tables if tables is not None else ClusterTables(cluster)
        self.view = view = RuntimeView(
            self.tables, cfg.time_scale, jobs, record_trace=cfg.record_trace
        )
        self.jobs = view.jobs
        self.scheduler = scheduler
        self.seed = seed
        self.programs = programs or {}
        self.on_task_done = on_task_done

        # What only the runtime has: attempts, values, failures, Ray calls in flight.
        self._attempts = [0] * view.n_tasks
        self._value: list[Any] = [None] * view.n_tasks
        n_jobs = len(self.jobs)
        self._failed = [False] * n_jobs
        self._open = [False] * n_jobs
        self.failures: list[WorkflowFailure] = []
        self.gpu_busy: dict[tuple[int, int], list[tuple[float, float]]] = {}
        self.cpu_busy = np.zeros(self.tables.n)
        self.workflows_failed = 0
        self.replaced = 0
        self.retries = 0
        self.decision_s = 0.0
        self.dispatch_s = 0.0
        self.lost_at: dict[int, float] = {}
        """Server index -> model time at which the driver learned it had died."""
        self._copies: dict[int, list[Any]] = {}
        """Task id -> the meta refs of its hedged copies still in flight."""
        self._cancelling: dict[Any, _Attempt] = {}
        """Copies asked to stop whose calls have not returned yet."""
        self._inflight: dict[Any, _Attempt] = {}
        self._agents: list[Any] = []
        self._node_ids: list[str] = []
        self._tool_fn: Any = None
        self._task_fn: Any = None
        self._deciding: tuple[int, Decision, float] | None = None
        """The task, decision and start time of the decision being answered."""

    # -- set-up ------------------------------------------------------------------------
    def connect(self, node_ids: Sequence[str] | None = None) -> None:
        """Find the node of every server and start its agent there (pinned, hard)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from scalesched.runtime.agent import ServerAgent
        from scalesched.runtime.cluster import map_servers

        if node_ids is None:
            node_ids = map_servers(self.cluster, ray.nodes())
        self._node_ids = list(node_ids)
        cfg = self.config
        actor = ray.remote(ServerAgent)
        self._agents = [
            actor.options(
                num_cpus=0,
                max_concurrency=100_000,
                max_restarts=0,
                max_task_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.cluster, s, cfg.time_scale, cfg.faults, cfg.endpoints, cfg.deployment)
            for s, node in enumerate(self._node_ids)
        ]
        hello = ray.get([a.hello.remote() for a in self._agents], timeout=120)
        for s, (server, node, _) in enumerate(hello):
            if server != s or node != self._node_ids[s]:  # pragma: no cover - Ray bug guard
                raise RuntimeError(f"agent of server {s} runs on node {node}, not its own")

    def close(self) -> None:
        """Stop the agents (their processes end; tasks still running are abandoned)."""
        import ray

        for agent in self._agents:
            with contextlib.suppress(Exception):  # an agent on a dead node is gone already
                ray.kill(agent, no_restart=True)
        self._agents = []

    def _fail_text(self, exc: BaseException) -> str:
        text = str(exc).strip().splitlines()
        last = [line for line in text if line.strip()]
        return (last[-1] if last else type(exc).__name__)[:300]

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> RuntimeResult:
        """Execute every job; returns when each workflow has completed or failed."""

        if not self._agents:
            self.connect()
        if self.scheduler is not None:
            self.scheduler.reset(self.seed)
        wall = time.perf_counter()
        view = self.view
        view.start()
        scale = self.config.time_scale
        next_job = 0
        n_jobs = len(self.jobs)
        open_jobs = 0
        while next_job < n_jobs or open_jobs > 0:
            now = view.now
            while next_job < n_jobs and self.jobs[next_job].arrival <= now:
                self._open[next_job] = True
                view.arrive(next_job, now)
                open_jobs += 1
                next_job += 1
            if view.pending:
                self._place_ready()
            open_jobs = sum(self._open)
            if not self._inflight:
                if view.pending:
                    continue
                if view.deferred and next_job == n_jobs:
                    view.force_deferred()  # nothing else will happen: they must be placed now
                    continue
                if next_job < n_jobs:
                    wait = (self.jobs[next_job].arrival - view.now) * scale
                    if wait > 0:
                        time.sleep(wait)
                    continue
                if open_jobs > 0:  # pragma: no cover - every open job has work somewhere
                    raise RuntimeError("open workflows with nothing in flight or ready")
                break
            timeout = 1.0
            if next_job < n_jobs:
                timeout = max(0.0, min(timeout, (self.jobs[next_job].arrival - view.now) * scale))
            self._collect(timeout)
            open_jobs = sum(self._open)
        while self._cancelling:  # charge the last cancelled copies
            self._collect(1.0)
        return self._summarise(time.perf_counter() - wall)

    def _collect(self, timeout: float) -> None:
        """Wait up to ``timeout`` wall seconds for calls to return; handle every one that did."""
        import ray

        refs = [*self._inflight, *self._cancelling]
        done, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if done:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        for ref in done:
            self._complete(ref)
        if done:
            self.view.release_deferred()  # a result has freed capacity

    # -- placement: the executor side of the decision cycle --------------------------------
    def _place_ready(self) -> None:
        if self.config.placement == "ray" or self.scheduler is None:  # Ray chooses
            view = self.view
            while view.pending:
                gid = view.pending.popleft()
                if not self._failed[view.tasks.job_of[gid]]:
                    self._dispatch(gid, -1, 0.0)
            return
        drive(self, self.scheduler)

    def next_decision(self) -> Decision | None:
        """The next ready task's decision (dead servers masked), in the scheduler's ready
        order; None when no task waits. A task no live server can run fails its workflow."""
        view = self.view
        order = self.scheduler.ready_order if self.scheduler is not None else "fifo"
        while view.pending:
            gid = view.pop_pending(order)
            if self._failed[view.tasks.job_of[gid]]:
                continue
            t0 = time.perf_counter()
            decision = make_decision(self.tables, view, view.request(gid, view.now))
            alive = view.alive
            if not alive.all():
                decision.mask = decision.mask & alive
                decision.finish_s = np.where(alive, decision.finish_s, np.inf)
            if not decision.mask.any():
                task = view.tasks.task(gid)
                what = f"model {task.model}" if task.kind == "llm" else "it"
                self._fail_workflow(gid, f"no live server can run {what}")
                continue
            decision.can_defer = view.may_defer(gid)
            self._deciding = (gid, decision, t0)
            return decision
        return None

    def apply(self, answer: int | Action) -> None:
        """Dispatch the task of the last decision where the scheduler answered: one server,
        every server of a hedge, or the deferred queue."""
        assert self.scheduler is not None and self._deciding is not None
        gid, decision, t0 = self._deciding
        self._deciding = None
        self.decision_s += time.perf_counter() - t0
        view = self.view
        servers = view.accept(gid, decision, answer, f"{self.scheduler.name}: ")
        if not servers:  # deferred
            return
        if len(servers) == 1:
            self._dispatch(gid, servers[0], float(decision.exec_s[servers[0]]))
            return
        if self.config.vehicle != "actor" or self._call_of(gid) is not None:
            raise SchedulingError(
                f"{self.scheduler.name} hedged task {view.tasks.task(gid).id}: hedging runs "
                "emulated and LLM tasks on the agents (vehicle 'actor'), never a Python "
                "function twice"
            )
        self._copies[gid] = [
            self._dispatch(gid, server, float(decision.exec_s[server]), copy=k)
            for k, server in enumerate(servers)
        ]

    def _call_of(self, gid: int) -> PyCall | None:
        ji = self.view.tasks.job_of[gid]
        return self.programs.get(self.jobs[ji].workflow_id, {}).get(
            gid - self.view.tasks.offset[ji]
        )

    def _dispatch(self, gid: int, server: int, est: float, copy: int = 0) -> Any:
        """Submit one attempt (or hedged copy) of task ``gid``; returns its meta ref."""
        t0 = time.perf_counter()
        view = self.view
        ji = view.tasks.job_of[gid]
        job = self.jobs[ji]
        wf = job.workflow
        off = view.tasks.offset[ji]
        i = gid - off
        task = wf.tasks[i]
        parents = tuple(
            (view.server[off + p], wf.edge_bytes.get((p, i), 0.0)) for p in wf.parents[i]
        )
        call = self._call_of(gid)
        backend = self.config.llm_backend if task.kind == "llm" else "emulated"
        spec = TaskSpec(
            workflow=job.workflow_id,
            task=task.id,
            attempt=self._attempts[gid],
            kind=task.kind,
            model=task.model,
            prompt_tokens=task.prompt_tokens,
            output_tokens=task.output_tokens,
            cpu_work=task.cpu_work,
            ext_latency=task.ext_latency,
            parents=parents,
            backend=backend,
            copy=copy,
            priority=view.priority[gid],
        )
        args: tuple[Any, ...] = ()
        if call is not None:
            args = tuple(
                self._value[off + a.index] if isinstance(a, ParentValue) else a for a in call.args
            )
        if call is not None and task.kind == "tool":
            meta_ref, value_ref = self._python_tool(server).remote(
                spec, self.config.time_scale, call.fn, *args
            )
        elif self.config.vehicle == "task":
            meta_ref, value_ref = self._vehicle_task(server, task).remote(
                spec, self._agent_map(), call.fn if call is not None else None, *args
            )
        elif call is not None:
            method = self._agents[server].run_python_llm.options(num_returns=2)
            meta_ref, value_ref = method.remote(spec, call.fn, *args)
        else:
            meta_ref, value_ref = self._agents[server].run.options(num_returns=2).remote(spec)
        self._inflight[meta_ref] = _Attempt(gid, server, est, spec, value_ref)
        if server >= 0:
            view.book(gid, server, est)
        self.dispatch_s += time.perf_counter() - t0
        return meta_ref

    def _python_tool(self, server: int) -> Any:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from scalesched.runtime.agent import python_tool

        if self._tool_fn is None:
            self._tool_fn = ray.remote(python_tool)
        strategy = (
            NodeAffinitySchedulingStrategy(self._node_ids[server], soft=False)
            if server >= 0
            else "DEFAULT"
        )
        return self._tool_fn.options(
            num_cpus=1, num_returns=2, max_retries=0, scheduling_strategy=strategy
        )

    def _agent_map(self) -> dict[str, Any]:
        return dict(zip(self._node_ids, self._agents, strict=True))

    def _vehicle_task(self, server: int, task: TaskInstance) -> Any:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from scalesched.runtime.agent import vehicle_task
        from scalesched.runtime.cluster import CORE_RESOURCE, MODEL_RESOURCE_PREFIX

        if self._task_fn is None:
            self._task_fn = ray.remote(vehicle_task)
        strategy = (
            NodeAffinitySchedulingStrategy(self._node_ids[server], soft=False)
            if server >= 0
            else "DEFAULT"
        )
        need = (
            {MODEL_RESOURCE_PREFIX + (task.model or ""): 1.0}
            if task.kind == "llm"
            else {CORE_RESOURCE: 1.0}
        )
        return self._task_fn.options(
            num_cpus=0, resources=need, num_returns=2, max_retries=0, scheduling_strategy=strategy
        )

    # -- results -----------------------------------------------------------------------
    def _complete(self, ref: Any) -> None:
        import ray
        from ray.exceptions import RayError

        if ref in self._cancelling:
            self._cancelled_returned(ref)
            return
        att = self._inflight.pop(ref)
        self.view.events += 1
        try:
            meta = ray.get(ref)
        except RayError as exc:
            with contextlib.suppress(Exception):  # mark the value's error seen, not "unhandled"
                ray.get(att.value_ref, timeout=0)
            if not self._drop_copy(att, ref):
                self._failed_call(att, exc)
            elif _system_error(exc):
                self._note_loss(att, exc)
            return
        self._cancel_siblings(att.gid, ref)
        self._finish(att, meta)

    def _cancelled_returned(self, ref: Any) -> None:
        """A cancelled copy's call came back: charge the seconds it held its server (all
        of its run if it finished before the cancellation reached it)."""
        import ray
        from ray.exceptions import RayError

        att = self._cancelling.pop(ref)
        try:
            meta = ray.get(ref)
        except RayError:
            with contextlib.suppress(Exception):
                ray.get(att.value_ref, timeout=0)
            return  # its server died: nothing more to charge
        view = self.view
        if meta.get("cancelled"):
            view.extra_server_seconds += float(meta["held_s"])
        else:
            view.extra_server_seconds += view.model_time(meta["end"]) - view.model_time(
                meta["start"]
            )
        if "engine_state" in meta and view.alive[att.server]:
            view.update_engines(
                att.server, meta["engine_state"], meta["free_gpus"], meta["idle_gpus"]
            )

    def _cancel_siblings(self, gid: int, winner: Any) -> None:
        """Task ``gid`` has its result: stop its other hedged copies."""
        for ref in self._copies.pop(gid, ()):
            att = self._inflight.pop(ref, None)
            if ref == winner or att is None:
                continue
            self._unbook(att)
            self._cancelling[ref] = att
            if self.view.alive[att.server]:
                self._agents[att.server].cancel.remote(att.spec.key)

    def _drop_copy(self, att: _Attempt, ref: Any) -> bool:
        """A hedged copy failed: drop it if another copy of its task still runs."""
        copies = self._copies.get(att.gid)
        if copies is None:
            return False
        copies.remove(ref)
        if not any(r in self._inflight for r in copies):
            del self._copies[att.gid]
            return False
        self._unbook(att)
        return True

    def _failed_call(self, att: _Attempt, exc: BaseException) -> None:
        if _system_error(exc):
            self._system_failure(att, exc)
        else:
            self._attempt_failed(att, self._fail_text(exc))

    def _unbook(self, att: _Attempt) -> None:
        if att.server >= 0 and self.view.alive[att.server]:
            self.view.unbook(att.gid, att.server, att.est)

    def _attempt_failed(self, att: _Attempt, error: str) -> None:
        self._unbook(att)
        gid = att.gid
        if self._failed[self.view.tasks.job_of[gid]]:
            return
        self._attempts[gid] += 1
        if self._attempts[gid] <= self.config.max_retries:
            self.retries += 1
            self.view.make_ready(gid, self.view.now)
            return
        self._fail_workflow(gid, f"{error} (after {self._attempts[gid]} attempts)")

    def _system_failure(self, att: _Attempt, exc: BaseException) -> None:
        """A call failed without the task raising: its agent or its node died.

        An agent that died (it is never restarted) takes its server out of the run; for
        other system errors (a worker crash, a lost object) the server is lost only if Ray
        reports its node dead, and otherwise the attempt counts as failed."""
        server = att.server
        self._note_loss(att, exc)
        if server >= 0 and not self.view.alive[server]:
            self.replaced += 1
            if not self._failed[self.view.tasks.job_of[att.gid]]:
                self.view.make_ready(att.gid, self.view.now)
            return
        self._attempt_failed(att, f"{type(exc).__name__}: {self._fail_text(exc)}")

    def _note_loss(self, att: _Attempt, exc: BaseException) -> None:
        """Take the attempt's server out of the run if its agent or its node died."""
        from ray.exceptions import RayActorError

        server = att.server
        cause = getattr(exc, "cause", None)
        agent_died = isinstance(exc, RayActorError) or isinstance(cause, RayActorError)
        if server >= 0 and self.view.alive[server] and (agent_died or self._node_dead(server)):
            self._lose_server(server)

    def _node_dead(self, server: int) -> bool:
        import ray

        node = self._node_ids[server]
        deadline = time.monotonic() + LOST_NODE_WAIT_S
        while True:
            rows = {str(n["NodeID"]): bool(n.get("Alive", False)) for n in ray.nodes()}
            if not rows.get(node, False):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def _lose_server(self, server: int) -> None:
        self.view.mark_dead(server)
        self.lost_at[server] = self.view.now

    def _fail_workflow(self, gid: int, error: str) -> None:
        ji = self.view.tasks.job_of[gid]
        if self._failed[ji]:
            return
        self._failed[ji] = True
        self._open[ji] = False
        self.workflows_failed += 1
        job = self.jobs[ji]
        self.failures.append(
            WorkflowFailure(job.workflow_id, job.workflow.name, self.view.tasks.task(gid).id, error)
        )

    def _finish(self, att: _Attempt, meta: dict[str, Any]) -> None:
        gid = att.gid
        view = self.view
        server = att.server if att.server >= 0 else int(meta["server"])
        task = view.tasks.task(gid)
        self._unbook(att)
        if "engine_state" in meta and view.alive[server]:
            view.update_engines(server, meta["engine_state"], meta["free_gpus"], meta["idle_gpus"])
        self._value[gid] = att.value_ref
        view.model_loads += int(bool(meta.get("loaded")))
        for src, nbytes in att.spec.parents:
            if src != server and nbytes > 0:
                view.bytes_moved += nbytes
        landed, start, end = (view.model_time(meta[k]) for k in ("landed", "start", "end"))
        view.server[gid], view.landed_at[gid], view.started_at[gid] = server, landed, start
        if task.kind == "llm" and task.model:
            m = MODEL_INDEX[task.model]
            spans = self.gpu_busy.setdefault((server, m), [])
            spans.append((start, end))
            if meta.get("loaded"):
                a, b = meta["loaded"]
                spans.append((view.model_time(a), view.model_time(b)))
        else:
            self.cpu_busy[server] += task.cpu_work / float(self.tables.core_speed[server])
        view.finish(gid, end)
        ji = view.tasks.job_of[gid]
        if not self._failed[ji] and view.release_children(gid, view.now):
            self._open[ji] = False
        if self.on_task_done is not None:
            self.on_task_done(self)

    # -- summary -------------------------------------------------------------------------
    def _summarise(self, wall_s: float) -> RuntimeResult:
        import ray

        t, view = self.tables, self.view
        rt = view.response_times
        arrivals = view.arrivals
        first = float(arrivals.min()) if arrivals.size else 0.0
        ends = [e for e in view.job_end if not math.isnan(e)]
        last_end = max([e for e in view.ended_at if not math.isnan(e)] + ends, default=first)
        makespan = max(0.0, last_end - first)
        horizon = max(makespan, 1e-12)
        gpu_area = np.zeros(t.n)
        for (s, m), spans in self.gpu_busy.items():
            gpu_area[s] += _union_length(spans) * float(t.tp[s, m])
        gpu = gpu_area / (np.maximum(t.gpus, 1) * horizon)
        cpu = self.cpu_busy / (t.cores * horizon)
        metrics = run_metrics(
            view.run_record(
                policy=self.scheduler.name if self.scheduler is not None else "ray-default",
                cluster=self.cluster.name,
                makespan_s=makespan,
                utilisation=(gpu, cpu),
                wall_s=wall_s,
            )
        )
        metrics["workflows_failed"] = self.workflows_failed
        outputs: dict[int, dict[str, Any]] = {}
        for ji, job in enumerate(self.jobs):
            if job.workflow_id not in self.programs or self._failed[ji]:
                continue
            wf = job.workflow
            off = view.tasks.offset[ji]
            sinks = [i for i in range(len(wf.tasks)) if not wf.children[i]]
            values = ray.get([self._value[off + i] for i in sinks])
            outputs[job.workflow_id] = {
                wf.tasks[i].id: v for i, v in zip(sinks, values, strict=True)
            }
        return RuntimeResult(
            metrics=metrics,
            response_times=rt,
            lower_bounds=view.lower_bounds.copy(),
            server_names=list(t.names),
            trace=view.trace,
            failures=self.failures,
            dead_servers=[t.names[s] for s in range(t.n) if not view.alive[s]],
            replaced=self.replaced,
            lost_at={t.names[s]: at for s, at in self.lost_at.items()},
            retries=self.retries,
            decision_s=self.decision_s,
            dispatch_s=self.dispatch_s,
            outputs=outputs,
        )


def _system_error(exc: BaseException) -> bool:
    """Whether a call failed without its task raising (an agent, worker or node is gone)."""
    from ray.exceptions import RayError, RayTaskError

    if isinstance(exc, RayTaskError):
        cause = getattr(exc, "cause", None)  # a vehicle task that lost its agent
        return isinstance(cause, RayError) and not isinstance(cause, RayTaskError)
    return True


def _union_length(spans: list[tuple[float, float]]) -> float:
    total = 0.0
    cur_start = cur_end = -math.inf
    for a, b in sorted(spans):
        if a > cur_end:
            if cur_end > cur_start:
                total += cur_end - cur_start
            cur_start, cur_end = a, b
        else:
            cur_end = max(cur_end, b)
    if cur_end > cur_start:
        total += cur_end - cur_start
    return total


def run_jobs(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    scheduler: Scheduler | None,
    config: RuntimeConfig | None = None,
    *,
    seed: int = 0,
    tables: ClusterTables | None = None,
    programs: dict[int, dict[int, PyCall]] | None = None,
    on_task_done: Callable[[Driver], None] | None = None,
) -> RuntimeResult:
    """Run ``jobs`` on the connected Ray cluster, every task placed by ``scheduler``."""
    driver = Driver(
        cluster,
        jobs,
        scheduler,
        config,
        seed=seed,
        tables=tables,
        programs=programs,
        on_task_done=on_task_done,
    )
    driver.connect()
    try:
        return driver.run()
    finally:
        driver.close()
