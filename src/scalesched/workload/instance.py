"""A realised workflow: the concrete DAG one request turns into.

Dynamic structure (branches, run-time fan-out widths, loop counts) is resolved when a
workflow is *realised* from its template with the workload's seed, so every scheduler meets
identical requests (common random numbers).  No scheduler sees the future all the same: a
task whose existence depends on a run-time decision carries ``revealed_by``, the index of
the deciding task, and the simulator exposes it only after that task finishes.  The
decider is always an ancestor of what it reveals, so readiness needs no extra logic.

Indices, not ids, link tasks: the simulator's hot path works on ints and tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

TaskKind = Literal["llm", "tool"]


@dataclass(frozen=True, slots=True)
class TaskInstance:
    """One primitive task. Fields marked *truth* are hidden from schedulers."""

    id: str
    kind: TaskKind
    model: str | None = None
    """LLM model name (catalog key) for ``llm`` tasks."""
    prompt_tokens: int = 0
    output_tokens: int = 0
    """Truth: tokens the LLM actually generates."""
    output_tokens_est: int = 0
    """What a scheduler is told to expect."""
    tool: str | None = None
    """Tool name for ``tool`` tasks (web_search, code_exec, retrieval, db_query, file_io, ...)."""
    cpu_work: float = 0.0
    """Core-seconds on a core of speed 1.0."""
    ext_latency: float = 0.0
    """Truth: seconds spent waiting on something outside the cluster (an API); no server
    speeds it up and it holds no core."""
    ext_latency_est: float = 0.0
    revealed_by: int | None = None
    """Index of the task whose completion reveals this one; None: known at arrival."""
    role: str | None = None
    """The LLM role the task was sized by (:mod:`scalesched.workload.roles`), if any."""
    difficulty_hint: float = 0.0
    """Observable, noisy signal of the hidden truth (:mod:`scalesched.workload.hints`)."""
    prefix_id: str | None = None
    """The application prompt this LLM call starts with (system prompt and tool schema,
    shared by every workflow of the application); None: no shared prefix, no caching
    (:mod:`scalesched.workload.sessions`)."""
    prefix_tokens: int = 0
    """Tokens of that shared application prompt (the first ``prefix_tokens`` of the prompt)."""
    context_of: int | None = None
    """Index of the earlier call of the same session whose whole context (prompt + output)
    this call's prompt begins with; None: the call opens its session."""
    repeat_of: int | None = None
    """Index of an earlier tool task of the same workflow this one repeats exactly (same
    tool, same inputs, so the same result); None: not a repeat
    (:mod:`scalesched.workload.repeats`)."""
    resample_of: int | None = None
    """Index of the first path of this call's branch group (the copies of one template
    call that continue the same context; the first path's own index for itself): the path
    whose logits a re-sampled branch can replay; None: not a branch
    (:func:`scalesched.workload.sessions.mark_replays`)."""
    replay_tokens: int = 0
    """Truth, hidden from schedulers like the output length: the leading output tokens this
    branch shares with its group's first path before it diverges (0 for the first path)."""


@dataclass(frozen=True, slots=True)
class WorkflowInstance:
    """A concrete DAG. ``tasks`` are in a topological order (parents before children)."""

    name: str
    pattern: str
    tasks: tuple[TaskInstance, ...]
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    edge_bytes: dict[tuple[int, int], float] = field(default_factory=dict)
    """Payload moved along edge (parent, child), in bytes; absent means 0."""

    def __len__(self) -> int:
        return len(self.tasks)


@dataclass(frozen=True, slots=True)
class Job:
    """A workflow instance arriving at the cluster at ``arrival`` seconds."""

    workflow_id: int
    arrival: float
    workflow: WorkflowInstance
