"""One setup for a run: cluster -> tables -> jobs -> policy -> simulate.

Every caller that runs a policy on a preset (the CLI, the study, the capacity search, the
Gantt chart of a report, the planner's share measurement, training's validation, scripts
and benchmarks) builds the same chain; it lives here once. ``--load`` is resolved to a rate
here, from the cluster's measured capacity (:mod:`scalesched.runs.capacity`), and the rate
is passed down: the simulator's :func:`scalesched.sim.scenario.build_jobs` never reaches up
into ``eval``.

Jobs are always built on the plain cluster's tables; a deployment changes only the tables
the run uses, so a run with and without one sees the same arrivals.

``prepare`` streams long runs (``STREAM_FROM`` workflows or more) by default:
``RunSetup.jobs`` is then a ``JobStream`` (arrival times drawn, each workflow realised when
read), so a run holds only the workflows in flight; reading ``setup.jobs[i]`` or iterating
it realises the same jobs as ``build_jobs``. Shorter runs realise their jobs up front (a
list): the same numbers, and about 15% less CPU time (a streamed run's per-job bookkeeping
and realisation between events, docs/benchmarks.md "Streaming runs"), where memory is no
concern. ``stream=True``/``False`` forces either.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scalesched.cluster.deployment import Deployment
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.scheduler import Scheduler
from scalesched.runs.world import RunWorld, resolve_world
from scalesched.sim import scenario as sim_scenario
from scalesched.sim.run import SimResult, simulate
from scalesched.sim.scenario import STREAM_FROM, Scenario, streams_by_default
from scalesched.workload.instance import Job

__all__ = [
    "RunSetup",
    "Scenario",
    "build_jobs",
    "prepare",
    "run",
    "scenario_capacity",
    "stream_jobs",
    "STREAM_FROM",
    "streams_by_default",
]


def scenario_capacity(tables: ClusterTables, scenario: Scenario) -> float | None:
    """The measured capacity ``--load`` scales (None when the scenario gives a rate)."""
    if scenario.rate is not None:
        return None
    sim_scenario.check_load(tables, scenario)  # before a capacity search is started
    from scalesched.runs.capacity import capacity_wps  # measured: runs the simulator

    return capacity_wps(tables.spec, scenario.workload)


def build_jobs(tables: ClusterTables, scenario: Scenario) -> list[Job]:
    """The jobs of a scenario, ``--load`` resolved: identical for every policy given the
    same seed."""
    capacity = scenario_capacity(tables, scenario)
    return sim_scenario.build_jobs(tables, scenario, capacity_wps=capacity)


def stream_jobs(tables: ClusterTables, scenario: Scenario) -> sim_scenario.JobStream:
    """:func:`build_jobs`, each job realised only when read (``JobStream``)."""
    capacity = scenario_capacity(tables, scenario)
    return sim_scenario.stream_jobs(tables, scenario, capacity_wps=capacity)


@dataclass(frozen=True)
class RunSetup:
    """A cluster and the jobs to run on it: what every policy of a comparison shares."""

    cluster: ClusterSpec
    tables: ClusterTables
    """The tables runs use (under the deployment, if any)."""
    jobs: Sequence[Job]
    """A ``JobStream`` (streamed: ``prepare(stream=True)``, and long runs by default) or a
    list (realised up front)."""
    scenario: Scenario
    """With ``rate`` resolved when the world is planned (``load`` x its capacity)."""
    deployment: Deployment | None = None
    world: RunWorld = RunWorld("dynamic")
    """The world the run is in, as every run's output names it."""
    load: float | None = None
    """The fraction of capacity asked for (``scenario.load``), also where the planned world
    resolved it to ``scenario.rate``; None where the scenario gave a rate."""


def prepare(
    cluster: str | ClusterSpec | ClusterTables,
    scenario: Scenario,
    *,
    deployment: str | Path | Deployment | None = None,
    stream: bool | None = None,
) -> RunSetup:
    """Resolve the cluster (a preset, a YAML path, a spec, or tables already built), build
    the scenario's jobs on it (streamed if ``stream``; None streams long runs: see the
    module docstring) and apply the deployment (a file or a loaded one)."""
    if isinstance(cluster, ClusterTables):
        tables = cluster
    else:
        if isinstance(cluster, str):
            from scalesched.cluster import get_cluster

            cluster = get_cluster(cluster)
        tables = ClusterTables(cluster)
    load = scenario.load if scenario.rate is None else None
    if deployment is not None:
        if not isinstance(deployment, Deployment):
            from scalesched.cluster.deployment import load_deployment_file

            deployment = load_deployment_file(deployment, tables.spec)
        world = RunWorld("deployment", deployment.name)
    else:
        if scenario.residency != "dynamic":
            sim_scenario.check_load(tables, scenario)  # before any planning or measuring
        rate, deployment, world = resolve_world(
            tables.spec,
            scenario.workload,
            scenario.residency,
            rate=scenario.rate,
            load=scenario.load,
        )
        scenario = dataclasses.replace(scenario, rate=rate)
    if stream is None:
        stream = streams_by_default(scenario)
    jobs: Sequence[Job] = (stream_jobs if stream else build_jobs)(tables, scenario)
    if deployment is not None:
        tables = ClusterTables(tables.spec, deployment)
    return RunSetup(tables.spec, tables, jobs, scenario, deployment, world, load)


def run(
    setup: RunSetup,
    scheduler: Scheduler | str,
    *,
    warmup: int | None = None,
    cooldown: int | None = None,
    record_trace: bool = False,
    on_workflow_done: Callable[[int], None] | None = None,
    trace_path: Path | None = None,
    kv_policy: str | None = None,
    tool_cache: bool = False,
    logits_cache: bool | None = None,
) -> SimResult:
    """Simulate the setup's jobs under ``scheduler`` (an instance or a registered name),
    seeded with the scenario's seed. ``warmup`` None (the default) is found from the run's
    responses by MSER; an int fixes it (0 measures from the first workflow). ``cooldown``
    defaults to the run-out (``default_cooldown``: the last arrivals, not measured).
    ``trace_path`` writes the trace as the run goes (see ``scalesched.sim.run.simulate``);
    ``tool_cache``: repeated tool calls reuse results (``scalesched.sim.tool_cache``);
    ``logits_cache``: re-sampled branches reuse logits (True) or are measured only (False;
    ``scalesched.sim.logits_cache``)."""
    from scalesched.runs.windows import default_cooldown

    if isinstance(scheduler, str):
        from scalesched.policies import get_policy

        scheduler = get_policy(scheduler)
    n = len(setup.jobs)
    return simulate(
        setup.cluster,
        setup.jobs,
        scheduler,
        seed=setup.scenario.seed,
        tables=setup.tables,
        record_trace=record_trace,
        on_workflow_done=on_workflow_done,
        warmup=warmup,
        cooldown=default_cooldown(n) if cooldown is None else cooldown,
        trace_path=trace_path,
        kv_policy=kv_policy,
        tool_cache=tool_cache,
        logits_cache=logits_cache,
    )
