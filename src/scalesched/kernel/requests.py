"""What a scheduler sees of a task (``TaskRequest``), built by the executor from the
realised task: estimates only, never the true output length or external latency."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from scalesched.cluster.tables import MODEL_INDEX
from scalesched.decision.features import TaskRequest
from scalesched.workload.instance import TaskInstance, WorkflowInstance


def task_request(
    wf: WorkflowInstance,
    i: int,
    parent_servers: Sequence[int],
    rank: float,
    workflow_age: float,
    attained_s: float = 0.0,
) -> TaskRequest:
    """What a scheduler may see of task ``i`` of ``wf``: estimates, never the truth."""
    task = wf.tasks[i]
    edge_bytes = wf.edge_bytes.get
    request = TaskRequest(
        kind=task.kind,
        model=MODEL_INDEX[task.model] if task.kind == "llm" and task.model else -1,
        prompt_tokens=task.prompt_tokens,
        output_tokens_est=task.output_tokens_est,
        cpu_work=task.cpu_work,
        ext_latency_est=task.ext_latency_est,
        parent_servers=tuple(parent_servers),
        parent_bytes=tuple([edge_bytes((p, i), 0.0) for p in wf.parents[i]]),
        rank=rank,
        workflow_age=workflow_age,
        attained_s=attained_s,
        role=task.role,
        pattern=wf.pattern,
        difficulty_hint=task.difficulty_hint,
    )
    return request if task.prefix_id is None else _with_prefix(request, wf, i, task)


def _with_prefix(
    request: TaskRequest, wf: WorkflowInstance, i: int, task: TaskInstance
) -> TaskRequest:
    """The request with the call's prefix identity, as a router reads it off the prompt."""
    ctx = task.context_of
    return dataclasses.replace(
        request,
        prefix_id=task.prefix_id,
        prefix_tokens=task.prefix_tokens,
        call_key=(wf.name, i),
        context_key=(wf.name, ctx) if ctx is not None else None,
    )
