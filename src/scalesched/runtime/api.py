"""Workflows written in Python: decorate tool and LLM functions, call them inside a
``Workflow`` block to build the DAG, run it on the cluster with any policy.

.. code-block:: python

    from scalesched.runtime.api import Workflow, llm, tool

    @tool(cpu_work=0.2, ext_latency=0.5)          # estimates the scheduler sees
    def search(query: str) -> list[str]:
        return ["doc one", "doc two"]

    @llm(model="llama-2-7b", prompt_tokens=400, output_tokens=128)
    def answer(query: str, docs: list[str]) -> str:
        return f"Answer {query!r} from {docs}"     # the prompt; the LLM backend answers it

    with Workflow("rag") as wf:
        docs = search("what is ray")               # a TaskRef, not the value
        answer("what is ray", docs)                # docs becomes an edge search -> answer

    result = run_workflows(cluster, [wf], get_policy("eft"), RuntimeConfig())
    result.outputs[0]["answer"]                    # the value of the sink task

A tool function runs for real as a Ray task pinned (hard) to the node the policy chose,
holding one logical CPU; an LLM function builds the prompt on the chosen node's agent, and
the configured backend answers it (``emulated``: the cost model's time, a placeholder
text; ``http``: an OpenAI-compatible endpoint). Values of parent tasks move between nodes
through Ray's object store. ``TaskRef`` arguments must be positional and top level; the
DAG is static (no run-time branching). Outside a ``Workflow`` block a decorated function is
a plain function.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from scalesched.cluster.model import ClusterSpec
from scalesched.decision.scheduler import Scheduler
from scalesched.errors import InputError
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

F = TypeVar("F", bound=Callable[..., Any])
_ACTIVE: list[Workflow] = []


@dataclass(frozen=True)
class TaskRef:
    """The future output of a task inside a ``Workflow`` block."""

    workflow: Workflow
    index: int
    task_id: str


@dataclass
class _Node:
    task: TaskInstance
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    parents: tuple[int, ...]
    output_bytes: float


@dataclass(eq=False)
class Workflow:
    """A DAG of decorated Python tasks, recorded by calling them inside ``with``."""

    name: str
    nodes: list[_Node] = field(default_factory=list)

    def __enter__(self) -> Workflow:
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.remove(self)

    def _add(
        self, task: TaskInstance, fn: Callable[..., Any], args: tuple[Any, ...], out: float
    ) -> TaskRef:
        if any(not isinstance(a, TaskRef) and _has_ref(a) for a in args):
            raise InputError(self.name, task.id, "TaskRefs must be top-level positional arguments")
        parents = []
        for a in args:
            if isinstance(a, TaskRef):
                if a.workflow is not self:
                    raise InputError(self.name, task.id, "an argument comes from another workflow")
                parents.append(a.index)
        used = {n.task.id for n in self.nodes}
        tid, k = task.id, 1
        while tid in used:
            tid, k = f"{task.id}-{k}", k + 1
        task = _replace_id(task, tid)
        self.nodes.append(_Node(task, fn, args, tuple(dict.fromkeys(parents)), out))
        return TaskRef(self, len(self.nodes) - 1, tid)

    def instance(self) -> WorkflowInstance:
        """The DAG as the simulator and the driver read it."""
        n = len(self.nodes)
        if n == 0:
            raise InputError(self.name, "tasks", "a workflow needs at least one task")
        children: list[list[int]] = [[] for _ in range(n)]
        edge_bytes: dict[tuple[int, int], float] = {}
        for i, node in enumerate(self.nodes):
            for p in node.parents:
                children[p].append(i)
                edge_bytes[(p, i)] = self.nodes[p].output_bytes
        return WorkflowInstance(
            name=self.name,
            pattern="python",
            tasks=tuple(node.task for node in self.nodes),
            parents=tuple(node.parents for node in self.nodes),
            children=tuple(tuple(c) for c in children),
            edge_bytes=edge_bytes,
        )

    def calls(self) -> dict[int, Any]:
        """Task index -> ``PyCall`` for the driver."""
        from scalesched.runtime.driver import ParentValue, PyCall

        return {
            i: PyCall(
                node.fn,
                tuple(ParentValue(a.index) if isinstance(a, TaskRef) else a for a in node.args),
            )
            for i, node in enumerate(self.nodes)
        }


def _has_ref(value: Any) -> bool:
    if isinstance(value, TaskRef):
        return True
    if isinstance(value, list | tuple | set):
        return any(_has_ref(v) for v in value)
    if isinstance(value, dict):
        return any(_has_ref(v) for v in value.values())
    return False


def _replace_id(task: TaskInstance, tid: str) -> TaskInstance:
    import dataclasses

    return dataclasses.replace(task, id=tid)


def _decorate(make_task: Callable[[str], TaskInstance], output_bytes: float) -> Callable[[F], F]:
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not _ACTIVE:
                return fn(*args, **kwargs)
            if kwargs:
                raise InputError(_ACTIVE[-1].name, fn.__name__, "pass task arguments by position")
            return _ACTIVE[-1]._add(make_task(fn.__name__), fn, args, output_bytes)

        call.__wrapped__ = fn  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def tool(
    *, cpu_work: float = 0.1, ext_latency: float = 0.0, output_bytes: float = 1e3
) -> Callable[[F], F]:
    """A tool task: the function runs on the chosen node. ``cpu_work`` (core-seconds) and
    ``ext_latency`` (seconds) are the estimates the scheduler sees."""
    if cpu_work < 0 or ext_latency < 0:
        raise InputError("@tool", "cpu_work", "estimates must be >= 0")

    def make(name: str) -> TaskInstance:
        return TaskInstance(
            id=name,
            kind="tool",
            tool=name,
            cpu_work=cpu_work,
            ext_latency=ext_latency,
            ext_latency_est=ext_latency,
        )

    return _decorate(make, output_bytes)


def llm(
    *, model: str, prompt_tokens: int = 512, output_tokens: int = 128, output_bytes: float = 4e3
) -> Callable[[F], F]:
    """An LLM task: the function returns the prompt; ``model`` is a catalog model name,
    ``prompt_tokens`` / ``output_tokens`` the lengths the scheduler (and the emulator) use;
    ``output_tokens`` is also the ``max_tokens`` of a real request."""
    from scalesched.cluster.tables import MODEL_NAMES

    if model not in MODEL_NAMES:
        raise InputError("@llm", "model", f"unknown model {model!r}; known: {MODEL_NAMES}")
    if prompt_tokens < 1 or output_tokens < 1:
        raise InputError("@llm", "tokens", "prompt_tokens and output_tokens must be >= 1")

    def make(name: str) -> TaskInstance:
        return TaskInstance(
            id=name,
            kind="llm",
            model=model,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            output_tokens_est=output_tokens,
        )

    return _decorate(make, output_bytes)


def workflow_jobs(
    workflows: Sequence[Workflow], arrivals: Sequence[float] | None = None
) -> tuple[list[Job], dict[int, dict[int, Any]]]:
    """Jobs (workflow ``i`` arrives at ``arrivals[i]``, default 0) and their Python calls."""
    times = list(arrivals) if arrivals is not None else [0.0] * len(workflows)
    if len(times) != len(workflows):
        raise InputError("arrivals", "arrivals", "one arrival time per workflow")
    jobs = [
        Job(workflow_id=i, arrival=float(t), workflow=wf.instance())
        for i, (wf, t) in enumerate(zip(workflows, times, strict=True))
    ]
    return jobs, {i: wf.calls() for i, wf in enumerate(workflows)}


def run_workflows(
    cluster: ClusterSpec,
    workflows: Sequence[Workflow],
    scheduler: Scheduler,
    config: Any = None,
    *,
    arrivals: Sequence[float] | None = None,
    seed: int = 0,
) -> Any:
    """Run Python workflows on the connected Ray cluster; ``result.outputs[i]`` holds the
    values of workflow ``i``'s sink tasks by task id."""
    from scalesched.runtime.driver import run_jobs

    jobs, programs = workflow_jobs(workflows, arrivals)
    return run_jobs(cluster, jobs, scheduler, config, seed=seed, programs=programs)
