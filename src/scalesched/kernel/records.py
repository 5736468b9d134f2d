"""What a run records and checks, shared by the simulator and the Ray runtime: the
per-task trace record, the contract-violation error, feasibility of a workload on a
cluster, and the contention-free lower bound of a workflow's response time."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.workload.instance import Job, TaskInstance

__all__ = ["TaskRecord", "alone_fastest_s", "check_feasible", "lower_bound"]


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


def check_feasible(tables: ClusterTables, jobs: Sequence[Job]) -> None:
    from scalesched.errors import InputError

    for job in jobs:
        for task in job.workflow.tasks:
            if task.kind != "llm":
                continue
            m = MODEL_INDEX.get(task.model or "")
            if m is None:
                raise InputError(
                    job.workflow.name, f"tasks[{task.id}].model", f"unknown model {task.model!r}"
                )
            if not bool(tables.feasible_any[m]):
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
    wf = job.workflow
    finish = [0.0] * len(wf.tasks)
    for i, task in enumerate(wf.tasks):
        took = alone_fastest_s(tables, task) if cost is None else cost(task)
        start = max((finish[p] for p in wf.parents[i]), default=0.0)
        finish[i] = start + took
    return max(finish, default=0.0)
