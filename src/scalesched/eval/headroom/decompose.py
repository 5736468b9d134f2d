"""Where each workflow's time above its contention-free bound went, along its realised
critical path.

The path: start at the workflow's last-finishing task and step back, each time, to the
parent that finished last (the one whose end made the task ready: the simulator readies a
task at the instant its last parent ends, so ``ready`` equals that parent's ``end``), until
a root, which was ready at the workflow's arrival. The response time is then exactly the
sum, over the path, of each task's ``end - ready``, and each of those splits into:

* ``transfer``: ``landed - ready``, the inputs travelling from the parents' servers (and
  any deferral, for a policy that defers);
* ``model_load``: ``loaded - landed``, an LLM call waiting for its engine to load (and for
  GPUs to load it on); 0 when the engine was resident;
* ``admission_wait``: the rest of an LLM call's wait to ``start``, for a batch slot or KV
  memory in its engine;
* ``tool_queue``: a tool's wait for a free CPU core (``start - landed``);
* ``batching``: the task's run (``end - start``) minus alone on that server with the reuse
  it had: decode steps slowed by the batch it shared (a tool's run equals its alone time:
  0);
* ``cache_miss``: alone on that server with the reuse it had, minus with the most reuse the
  run allows (``Reuse``): prefill of prompt blocks the engine's KV cache did not hold, a
  repeated tool call that ran instead of taking its original's result (0 without caches);
* ``slower_server``: alone on the server it ran on, minus alone on the fastest server for
  it, both with the most reuse (what placement on a slower server costs with no
  contention at all);
* and the task alone on its fastest server with the most reuse, whose sum over the path is
  the path's own contention-free length.

The workflow's bound is the longest such contention-free path, so ``path`` (the realised
path's contention-free length minus the bound, <= 0) completes the identity: response -
bound = the sum of the eight components, exactly (up to float rounding), per workflow.

With caches on, "alone" counts the least a task could take: a call with a prompt prefix
identity prefills only its last block (everything else could have been cached), a repeated
tool call takes ``LOOKUP_S``; the trace's ``skipped`` says how much of its alone time each
task actually skipped. Without caches every task takes its full alone time and
``cache_miss`` is 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scalesched.cache.kv import cached_prefill
from scalesched.cluster.anywhere import AnyDeployment
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.kernel.records import (
    TaskRecord,
    alone_anywhere_s,
    alone_fastest_s,
    any_deployment_lower_bound,
    lower_bound,
)
from scalesched.sim.tool_cache import LOOKUP_S
from scalesched.workload.instance import Job, TaskInstance

COMPONENTS: tuple[str, ...] = (
    "slower_server",
    "admission_wait",
    "batching",
    "model_load",
    "transfer",
    "tool_queue",
    "cache_miss",
    "path",
)
"""The parts of (response - contention-free bound), in the order tables show them."""

COMPONENT_HELP: dict[str, str] = {
    "slower_server": "alone on the chosen server minus alone on the fastest",
    "admission_wait": "LLM call waiting in its engine for a batch slot or KV memory",
    "batching": "run time minus alone on that server (decode slowed by the batch)",
    "model_load": "LLM call waiting for its model to load",
    "transfer": "inputs moving between servers (and deferral)",
    "tool_queue": "tool waiting for a free CPU core",
    "cache_miss": "prefill and tool runs a cache could have skipped (0 without caches)",
    "path": "realised path's contention-free length minus the bound (<= 0)",
}


@dataclass(frozen=True)
class WorkflowSplit:
    """One workflow's (response - bound) along its realised critical path."""

    response: float
    bound: float
    parts: dict[str, float]
    by_model: dict[str, dict[str, float]]
    """The per-task parts summed per model (``tool`` for tool tasks)."""
    by_server_type: dict[str, dict[str, float]]

    @property
    def residual(self) -> float:
        """response - bound - sum of the parts: 0 up to rounding."""
        return self.response - self.bound - math.fsum(self.parts.values())


@dataclass(frozen=True)
class Reuse:
    """What a run may reuse, which lowers the least a task can take alone: ``kv``, an LLM
    call's prompt prefix from its engine's KV cache (``--kv-policy`` other than off and
    nocache); ``tools``, a repeated tool call's result (``--tool-cache on``)."""

    kv: bool = False
    tools: bool = False

    def prefilled(self, task: TaskInstance) -> int:
        """The fewest prompt tokens the call must compute: with KV reuse, a call with a
        prefix identity could find all but its last block cached
        (``scalesched.cache.kv.cached_prefill``)."""
        prompt = task.prompt_tokens
        if self.kv and task.prefix_id is not None:
            return prompt - cached_prefill(prompt, prompt)
        return prompt

    def kv_tokens(self, task: TaskInstance) -> int:
        """The fewest KV tokens the call holds for itself: with KV reuse, a call with a
        prefix identity could share its whole prompt with the segments cached before it."""
        if self.kv and task.prefix_id is not None:
            return max(1, task.output_tokens)
        return task.prompt_tokens + task.output_tokens

    def tool_s(self, task: TaskInstance, alone_s: float) -> float:
        """The least a tool call takes: a repeat could take its original's result."""
        if self.tools and task.repeat_of is not None:
            return min(alone_s, LOOKUP_S)
        return alone_s


NO_REUSE = Reuse()


def alone_on(
    tables: ClusterTables, task: TaskInstance, server: int, reuse: Reuse = NO_REUSE
) -> float:
    """Seconds the task takes alone on ``server``: no batch, no queue, no load; with the
    most ``reuse`` allows (none: its full work)."""
    if task.kind != "llm" or not task.model:
        return reuse.tool_s(
            task, task.cpu_work / float(tables.core_speed[server]) + task.ext_latency
        )
    m = MODEL_INDEX[task.model]
    k = int(tables.engine_class[server, m])
    out = max(1, task.output_tokens)
    ctx = task.prompt_tokens + out // 2
    step = float(tables.decode_lin[k, 1]) + float(tables.decode_attn[k]) * ctx
    return tables.engines[k].prefill_s(reuse.prefilled(task)) + out * step


def alone_fastest(tables: ClusterTables, task: TaskInstance, reuse: Reuse = NO_REUSE) -> float:
    """Alone on the fastest server for it: the per-task cost of ``kernel.records.lower_bound``
    (with ``reuse``: the least any run with those caches could take)."""
    if reuse == NO_REUSE:
        return alone_fastest_s(tables, task)
    if task.kind == "llm" and task.model:
        m = MODEL_INDEX[task.model]
        out = max(1, task.output_tokens)
        return tables.fastest_llm_time(m, task.prompt_tokens, out, reuse.prefilled(task))
    return reuse.tool_s(task, alone_fastest_s(tables, task))


def contention_free_bound(tables: ClusterTables, job: Job, reuse: Reuse = NO_REUSE) -> float:
    """``kernel.records.lower_bound`` with the most ``reuse`` allows: no schedule with those
    caches can beat it (without reuse, the same number)."""
    return lower_bound(tables, job, lambda task: alone_fastest(tables, task, reuse))


def any_deployment_bound(anywhere: AnyDeployment, job: Job, reuse: Reuse = NO_REUSE) -> float:
    """``kernel.records.any_deployment_lower_bound`` with the most ``reuse`` allows: every
    call alone on the fastest configuration any deployment of the cluster can give its
    model, counting only the prefill and tool runs no cache could skip. At most
    ``contention_free_bound`` of every world's tables on the same cluster."""
    return any_deployment_lower_bound(
        anywhere, job, lambda task: alone_anywhere(anywhere, task, reuse)
    )


def alone_anywhere(anywhere: AnyDeployment, task: TaskInstance, reuse: Reuse = NO_REUSE) -> float:
    """The task alone on the fastest configuration any deployment of the cluster can give
    it, counting only what no cache (``reuse``) could skip: the per-task cost of
    ``any_deployment_bound``."""
    if task.kind == "llm" and task.model:
        return alone_anywhere_s(anywhere, task, reuse.prefilled(task))
    return reuse.tool_s(task, alone_anywhere_s(anywhere, task))


def critical_path(job: Job, records: dict[int, TaskRecord]) -> list[int]:
    """Task indexes of the realised critical path, last task first (see module doc)."""
    wf = job.workflow
    i = max(records, key=lambda j: (records[j].end, j))
    path = [i]
    while wf.parents[i]:
        ready = records[i].ready
        # the parent whose end released it; rounding cannot part them (same double)
        i = min(wf.parents[i], key=lambda p: (abs(records[p].end - ready), -records[p].end))
        path.append(i)
    return path


def _task_parts(
    tables: ClusterTables, task: TaskInstance, r: TaskRecord, reuse: Reuse
) -> dict[str, float]:
    full = alone_on(tables, task, r.server)
    least = full if reuse == NO_REUSE else alone_on(tables, task, r.server, reuse)
    had = full - r.skipped  # alone with the reuse it had
    parts = {
        "transfer": r.landed - r.ready,
        "slower_server": least - alone_fastest(tables, task, reuse),
        "cache_miss": had - least,
        "batching": (r.end - r.start) - had,
    }
    if task.kind == "llm":
        loaded = r.loaded if r.loaded == r.loaded else r.landed  # NaN: it was resident
        parts["model_load"] = loaded - r.landed
        parts["admission_wait"] = r.start - loaded
    else:
        parts["tool_queue"] = r.start - r.landed
    return parts


def split_workflow(
    tables: ClusterTables,
    job: Job,
    bound: float,
    rows: Iterable[TaskRecord],
    reuse: Reuse = NO_REUSE,
) -> WorkflowSplit:
    """The split of one workflow, from its tasks' trace records."""
    wf = job.workflow
    index = {t.id: i for i, t in enumerate(wf.tasks)}
    records = {index[r.task]: r for r in rows}
    path = critical_path(job, records)
    parts = dict.fromkeys(COMPONENTS, 0.0)
    by_model: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COMPONENTS, 0.0))
    by_type: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COMPONENTS, 0.0))
    fastest = 0.0
    for i in path:
        task, r = wf.tasks[i], records[i]
        fastest += alone_fastest(tables, task, reuse)
        model = task.model if task.kind == "llm" and task.model else "tool"
        kind = tables.spec.servers[r.server].type
        for name, value in _task_parts(tables, task, r, reuse).items():
            parts[name] += value
            by_model[model][name] += value
            by_type[kind][name] += value
    parts["path"] = fastest - bound
    response = records[path[0]].end - job.arrival
    return WorkflowSplit(response, bound, parts, dict(by_model), dict(by_type))


@dataclass(frozen=True)
class Decomposition:
    """The mean split of a policy's measured workflows (seconds per workflow)."""

    workflows: int
    mean_response: float
    mean_bound: float
    components: dict[str, float]
    by_model: dict[str, dict[str, float]]
    by_server_type: dict[str, dict[str, float]]
    max_abs_residual: float
    """Largest |response - bound - sum of parts| of one workflow: rounding only."""

    def as_json(self) -> dict[str, object]:
        return {
            "workflows": self.workflows,
            "mean_response_s": self.mean_response,
            "mean_bound_s": self.mean_bound,
            "gap_s": self.mean_response - self.mean_bound,
            "components_s": self.components,
            "by_model_s": self.by_model,
            "by_server_type_s": self.by_server_type,
            "max_abs_residual_s": self.max_abs_residual,
        }


def _mean_nested(
    rows: Sequence[dict[str, dict[str, float]]], n: int
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        for key, parts in row.items():
            acc = out.setdefault(key, dict.fromkeys(COMPONENTS, 0.0))
            for name, value in parts.items():
                acc[name] += value / n
    return {k: {c: v for c, v in parts.items() if c != "path"} for k, parts in sorted(out.items())}


def decompose(
    tables: ClusterTables,
    jobs: Sequence[Job],
    bounds: dict[int, float],
    trace: Iterable[TaskRecord],
    reuse: Reuse = NO_REUSE,
) -> tuple[Decomposition, list[WorkflowSplit]]:
    """Split every workflow of ``bounds`` (workflow id -> contention-free bound with
    ``reuse``: the measured ones) and average; the per-workflow splits come back too."""
    rows: dict[int, list[TaskRecord]] = defaultdict(list)
    for r in trace:
        if r.workflow in bounds:
            rows[r.workflow].append(r)
    by_id = {job.workflow_id: job for job in jobs if job.workflow_id in bounds}
    splits = [split_workflow(tables, by_id[w], bounds[w], rows[w], reuse) for w in sorted(bounds)]
    n = max(1, len(splits))
    comps = {c: math.fsum(s.parts[c] for s in splits) / n for c in COMPONENTS}
    residuals = np.array([abs(s.residual) for s in splits]) if splits else np.zeros(1)
    return (
        Decomposition(
            workflows=len(splits),
            mean_response=math.fsum(s.response for s in splits) / n,
            mean_bound=math.fsum(s.bound for s in splits) / n,
            components=comps,
            by_model=_mean_nested([s.by_model for s in splits], n),
            by_server_type=_mean_nested([s.by_server_type for s in splits], n),
            max_abs_residual=float(residuals.max()),
        ),
        splits,
    )
