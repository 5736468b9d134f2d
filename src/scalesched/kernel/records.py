"""What a run records and checks, shared by the simulator and the Ray runtime: the
per-task trace record, the contract-violation error, feasibility of a workload on a
cluster, and the contention-free lower bounds of a workflow's response time: the run's
(every task alone on the fastest server of the run's world) and the world-independent one
(every call alone on the fastest configuration any deployment of the cluster can give its
model, ``cluster.anywhere``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalesched.cluster.anywhere import AnyDeployment
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.workload.instance import Job, TaskInstance

__all__ = [
    "TaskRecord",
    "alone_anywhere_s",
    "alone_fastest_s",
    "any_deployment_lower_bound",
    "check_feasible",
    "job_bounds",
    "lower_bound",
]


@dataclass(slots=True)
class TaskRecord:
    """One executed task, for the trace and the Gantt chart."""

    workflow: int
    task: str
    kind: str
    model: str | None
    server: int
    ready: float
    landed: float
    start: float
    end: float
    loaded: float = math.nan
    """An LLM call that landed while its engine was loading: when the engine became ready
    (the rest of its wait, to ``start``, was admission). NaN: the engine was resident."""
    skipped: float = 0.0
    """Seconds of its alone time the task skipped by reuse: the prefill of prompt tokens the
    engine's KV cache held, or a repeated tool's run when it took its original's result."""


def task_record(
    job: Job,
    task: TaskInstance,
    server: int,
    times: tuple[float, float, float, float],
    loaded: float = math.nan,
    skipped: float = 0.0,
) -> TaskRecord:
    """The trace row of ``task`` of ``job`` run on ``server``; ``times``: (ready, landed,
    start, end). The one construction every engine's trace uses (the ledger's finish, the
    compiled core's runs)."""
    ready, landed, start, end = times
    return TaskRecord(
        workflow=job.workflow_id,
        task=task.id,
        kind=task.kind,
        model=task.model,
        server=server,
        ready=ready,
        landed=landed,
        start=start,
        end=end,
        loaded=loaded,
        skipped=skipped,
    )


def check_feasible(tables: ClusterTables, jobs: Sequence[Job]) -> None:
    """An InputError naming the workflow and task of the first LLM call whose model is
    unknown or that no server of ``tables`` can run. (One set lookup per task: this runs
    over every task of a run before it starts.)"""
    runnable = {name for name, m in MODEL_INDEX.items() if bool(tables.feasible_any[m])}
    for job in jobs:
        for task in job.workflow.tasks:
            if task.kind == "llm" and (task.model or "") not in runnable:
                _refuse(tables, job, task)


def _refuse(tables: ClusterTables, job: Job, task: TaskInstance) -> None:
    from scalesched.errors import InputError

    if MODEL_INDEX.get(task.model or "") is None:
        raise InputError(
            job.workflow.name, f"tasks[{task.id}].model", f"unknown model {task.model!r}"
        )
    raise InputError(
        tables.spec.name,
        "servers",
        f"no server can run model {task.model!r} "
        f"(needed by task {task.id!r} of {job.workflow.name})",
    )


def alone_fastest_s(tables: ClusterTables, task: TaskInstance) -> float:
    """Seconds the task takes alone on its fastest feasible server, with no reuse."""
    if task.kind == "llm" and task.model:
        return tables.fastest_llm_time(
            MODEL_INDEX[task.model], task.prompt_tokens, max(1, task.output_tokens)
        )
    return task.cpu_work / tables.max_core_speed + task.ext_latency


def lower_bound(
    tables: ClusterTables,
    job: Job,
    cost: Callable[[TaskInstance], float] | None = None,
) -> float:
    """Contention-free critical path: every task alone on its fastest feasible server,
    no queueing, no model loads, no transfers. No schedule can beat it. ``cost``: the
    per-task seconds instead (a caller that counts what caches may skip,
    ``scalesched.eval.headroom.decompose.contention_free_bound``)."""
    return critical_path(job, cost or (lambda task: alone_fastest_s(tables, task)))


def alone_anywhere_s(
    anywhere: AnyDeployment, task: TaskInstance, prefilled: int | None = None
) -> float:
    """Seconds the task takes alone on the fastest configuration any deployment of the
    cluster can give it (``cluster.anywhere``); ``prefilled``: the prompt tokens computed
    (default all: no reuse). A tool's is its run on the fastest core, as in every world."""
    if task.kind == "llm" and task.model:
        return anywhere.llm_time(
            MODEL_INDEX[task.model], task.prompt_tokens, max(1, task.output_tokens), prefilled
        )
    return task.cpu_work / anywhere.max_core_speed + task.ext_latency


def any_deployment_lower_bound(
    anywhere: AnyDeployment,
    job: Job,
    cost: Callable[[TaskInstance], float] | None = None,
) -> float:
    """The world-independent contention-free bound: every call alone on the fastest
    configuration any deployment of the cluster can give its model (any tensor-parallel
    degree, GPU type, share and replica count that fits on some server), whatever
    deployment the run has. It is at most the run's own ``lower_bound`` in every world, so
    runs in different worlds on the same jobs are measured against one figure. ``cost``:
    the per-task seconds instead (a caller counting cache reuse)."""
    return critical_path(job, cost or (lambda task: alone_anywhere_s(anywhere, task)))


def job_bounds(tables: ClusterTables, anywhere: AnyDeployment, job: Job) -> tuple[float, float]:
    """The two bounds a run fixes at a job's arrival: ``lower_bound`` and
    ``any_deployment_lower_bound`` (an executor may compute them on a faster core, to the
    same doubles: ``scalesched.sim.core``)."""
    return lower_bound(tables, job), any_deployment_lower_bound(anywhere, job)


def critical_path(job: Job, cost: Callable[[TaskInstance], float]) -> float:
    """The workflow's longest path when each task takes ``cost(task)`` seconds."""
    wf = job.workflow
    finish = [0.0] * len(wf.tasks)
    for i, task in enumerate(wf.tasks):
        took = cost(task)
        start = max((finish[p] for p in wf.parents[i]), default=0.0)
        finish[i] = start + took
    return max(finish, default=0.0)
