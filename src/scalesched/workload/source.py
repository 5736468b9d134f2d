"""The public face of the workload package: where workflows come from.

``get_workload(spec)`` turns a preset name (see :func:`list_workloads`) or the path of a
WfFormat JSON file into a :class:`WorkflowSource`; ``sample_jobs`` pairs arrival times
with workflows realised from it.  Workflow ``i`` of a job list is realised with its own
generator, ``SeedSequence(seed, spawn_key=(i,))`` (the ``i``-th child of
``SeedSequence(seed).spawn``), so it depends on nothing but ``(seed, i)``: every
scheduler, arrival process and list length sees the same workflow ``i``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from scalesched.errors import InputError
from scalesched.workload.agent_patterns import AGENT_DESCRIPTIONS, AGENT_PATTERNS
from scalesched.workload.arrivals import replay_arrivals
from scalesched.workload.instance import Job, WorkflowInstance
from scalesched.workload.patterns import DESCRIPTIONS, PATTERNS
from scalesched.workload.template import WorkflowTemplate, realize


@runtime_checkable
class WorkflowSource(Protocol):
    name: str

    def sample(self, rng: np.random.Generator) -> WorkflowInstance: ...


@dataclass
class PatternSource:
    """A preset: a template generator, realised per draw."""

    name: str
    generator: Callable[[np.random.Generator], WorkflowTemplate]
    description: str = ""

    def sample(self, rng: np.random.Generator) -> WorkflowInstance:
        return realize(self.generator(rng), rng)


@dataclass
class TemplateSource:
    """One fixed template (e.g. loaded from a WfFormat file), realised per draw."""

    name: str
    template: WorkflowTemplate
    description: str = ""

    def sample(self, rng: np.random.Generator) -> WorkflowInstance:
        return realize(self.template, rng)


RESEARCH_ONLY_WORKLOADS: dict[str, str] = {}
"""Workload presets kept only to reproduce a study (a synthetic stress shape no deployment
sees), by name, with why; ``scalesched workloads`` marks them. None today: the six patterns
and agentic-mix draw their token lengths from production traces, and the presets with
prefix identities (tool-heavy, coordinator, the test-time-scaling family and agent-mix)
model agent applications a cluster serves, whatever study they were added for (docs/cache.md)."""


def list_workloads(*, families: bool = False) -> list[tuple[str, str]]:
    """Preset names with a one-line description each (``families``: and the spec forms)."""
    rows = [(name, DESCRIPTIONS[name]) for name in PATTERNS]
    rows += [(name, AGENT_DESCRIPTIONS[name]) for name in AGENT_PATTERNS]
    if families:
        rows.append(
            (
                "wfcommons:RECIPE:TASKS[:SEED]",
                "a WfCommons recipe instance, e.g. "
                "wfcommons:montage:200 (needs the optional wfcommons extra)",
            )
        )
    return rows


def get_workload(spec: str) -> WorkflowSource:
    """A preset name, a path to a WfFormat JSON file whose template is realised per draw, or
    ``wfcommons:RECIPE:TASKS[:SEED]`` (see :mod:`scalesched.workload.wfcommons_gen`)."""
    if spec in PATTERNS:
        return PatternSource(spec, PATTERNS[spec], DESCRIPTIONS[spec])
    if spec in AGENT_PATTERNS:  # the presets with prefix identities (agent_patterns.py)
        return PatternSource(spec, AGENT_PATTERNS[spec], AGENT_DESCRIPTIONS[spec])
    if spec.startswith("wfcommons:"):
        from scalesched.workload.wfcommons_gen import wfcommons_source

        return wfcommons_source(spec)
    p = Path(spec)
    if p.suffix.lower() == ".json" or p.exists() or "/" in spec or "\\" in spec:
        from scalesched.workload.wfformat import load_workflow_template

        t = load_workflow_template(p)
        return TemplateSource(t.name, t, t.description or f"WfFormat file {spec}")
    raise InputError(
        "--workload",
        "name",
        f"unknown workload {spec!r}; presets: {', '.join([*PATTERNS, *AGENT_PATTERNS])}; or "
        "give the path of a WfFormat .json file, or wfcommons:RECIPE:TASKS[:SEED]",
    )


def workflow_rng(seed: int, i: int) -> np.random.Generator:
    """The generator workflow ``i`` of a run seeded ``seed`` is realised with."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(i,)))


def sample_jobs(source: WorkflowSource, arrivals: Sequence[float], seed: int) -> list[Job]:
    """One job per arrival time; workflow ``i`` is named ``<pattern>-<i>``."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InputError("sample_jobs", "seed", f"must be an integer >= 0, got {seed!r}")
    times = replay_arrivals(arrivals)
    n = len(times)
    jobs: list[Job] = []
    tasks = 0
    for i, t in enumerate(times.tolist()):
        w = source.sample(workflow_rng(int(seed), i))
        w = dataclasses.replace(w, name=f"{w.pattern}-{i}")
        jobs.append(Job(workflow_id=i, arrival=t, workflow=w))
        tasks += len(w.tasks)
        _check_run_size(source, tasks, i + 1, n)
    return jobs


MAX_RUN_TASKS = 1_000_000
"""Most tasks of one run, summed over its realised workflows: each is built in memory before
the run starts, and the simulator takes about a minute per million
(docs/cluster-and-workload.md, "Limits")."""


def _check_run_size(source: WorkflowSource, tasks: int, done: int, n: int) -> None:
    """Fail once the run's tasks exceed the cap, or as soon as the mean so far says they
    will by far (4x on the first workflows, 1x after eight), before realising the rest."""
    estimate = tasks / done * n
    if tasks <= MAX_RUN_TASKS and estimate <= (MAX_RUN_TASKS if done >= 8 else 4 * MAX_RUN_TASKS):
        return
    raise InputError(
        "--workflows",
        "workflows",
        f"{n} workflows of {source.name!r} would hold about {estimate:.3g} tasks "
        f"({tasks / done:.0f} per workflow); at most {MAX_RUN_TASKS} in one run: lower "
        "--workflows or the workflow's fan-out widths and loop counts",
    )
