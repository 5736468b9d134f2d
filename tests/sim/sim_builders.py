"""Hand-built workflows, so simulator tests do not depend on the workload generators; and
the spies that tell where a run went (the compiled core's whole runs, its decisions)."""

from __future__ import annotations

from typing import Any

import pytest

from scalesched.sim import compiled_run, core
from scalesched.sim import run as sim_run
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance


def spy_compiled(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[bool]]:
    """(decisions built on the compiled core so far, whether each run since went whole
    through it: ``sim.compiled_run``), both kept up to date as runs go."""
    built, whole = [0], []
    real_build, real_run = core.make_decision_compiled, compiled_run.run_compiled

    def counted(*args: Any, **kwargs: Any) -> Any:
        built[0] += 1
        return real_build(*args, **kwargs)

    def spied(*args: Any) -> bool:
        whole.append(real_run(*args))
        return whole[-1]

    monkeypatch.setattr(core, "make_decision_compiled", counted)
    monkeypatch.setattr(sim_run, "run_compiled", spied)
    return built, whole


def llm(
    tid: str, model: str = "llama-2-7b", prompt: int = 500, out: int = 200, est: int | None = None
) -> TaskInstance:
    return TaskInstance(
        tid,
        "llm",
        model=model,
        prompt_tokens=prompt,
        output_tokens=out,
        output_tokens_est=out if est is None else est,
    )


def tool(tid: str, cpu: float = 1.0, ext: float = 0.0) -> TaskInstance:
    return TaskInstance(
        tid, "tool", tool="code_exec", cpu_work=cpu, ext_latency=ext, ext_latency_est=ext
    )


def workflow(
    tasks: list[TaskInstance], edges: dict[tuple[int, int], float], name: str = "wf"
) -> WorkflowInstance:
    n = len(tasks)
    parents = tuple(tuple(sorted(p for (p, c) in edges if c == i)) for i in range(n))
    children = tuple(tuple(sorted(c for (p, c) in edges if p == i)) for i in range(n))
    return WorkflowInstance(name, "test", tuple(tasks), parents, children, dict(edges))


def toy_jobs(n: int, gap: float = 0.2) -> list[Job]:
    """A mixed LLM/tool diamond with three model sizes, arriving every ``gap`` seconds."""
    jobs = []
    for i in range(n):
        tasks = [
            llm("plan", "llama-2-7b", 500, 100 + (i * 37) % 300, 200),
            tool("search", cpu=0.1, ext=0.5),
            tool("code", cpu=2.0),
            llm("answer", "codellama-34b", 1500, 300, 250),
            llm("judge", "llama-2-70b", 800, 100, 100),
        ]
        edges = {(0, 1): 1e4, (0, 2): 1e3, (1, 3): 1e6, (2, 3): 5e5, (3, 4): 1e3}
        jobs.append(Job(i, i * gap, workflow(tasks, edges, f"toy-{i}")))
    return jobs
