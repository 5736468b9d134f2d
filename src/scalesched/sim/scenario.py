"""From a few user-facing settings (cluster, workload, load, seed) to the jobs of a run.

``--load`` needs the cluster's capacity, which depends on execution costs; it is computed
here, not in ``scalesched.workload``, so workload specs stay free of execution details.

Capacity (workflows per second) is that of the bottleneck resource class:
``1 / max(D_gpu / G, D_cpu / C)``, where G is the cluster's GPU count, C its core count,
D_gpu the mean GPU-seconds of one workflow's LLM tasks when served at a reference batch of
``REFERENCE_BATCH`` (prefill + output x the per-request share of a decode step, times the
engine's GPU count, averaged over the engine classes (model, GPU type, tp) that can run it)
and D_cpu the mean core-seconds of its tool tasks. External latency holds no resource and
does not count.
The means come from ``CAPACITY_SAMPLES`` workflows drawn with a fixed seed, so capacity is a
property of (cluster, workload) alone and every run seed sees the same arrival rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from scalesched.errors import InputError
from scalesched.policies.features import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.workload.arrivals import bursty_arrivals, load_arrival_times, poisson_arrivals
from scalesched.workload.instance import Job, TaskInstance
from scalesched.workload.source import WorkflowSource, get_workload, sample_jobs

REFERENCE_BATCH = 16
CAPACITY_SAMPLES = 200
CAPACITY_SEED = 20260

ArrivalKind = Literal["poisson", "bursty"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """What to run: the workload side of a simulation (the cluster comes separately)."""

    workload: str = "agentic-mix"
    workflows: int = 200
    load: float = 0.7
    """Arrival rate as a fraction of the cluster's nominal capacity (ignored with ``rate``)."""
    rate: float | None = None
    """Workflows per second; overrides ``load``."""
    arrivals: str = "poisson"
    """``poisson``, ``bursty`` or ``replay:PATH`` (a file of arrival times)."""
    seed: int = 0


def workflow_demand(tables: ClusterTables, source: WorkflowSource) -> tuple[float, float]:
    """Mean (GPU-seconds, core-seconds) one workflow of ``source`` needs on this cluster."""
    rng = np.random.default_rng(CAPACITY_SEED)
    gpu = cpu = 0.0
    for _ in range(CAPACITY_SAMPLES):
        wf = source.sample(rng)
        for task in wf.tasks:
            if task.kind == "llm" and task.model:
                gpu += _llm_gpu_seconds(tables, MODEL_INDEX[task.model], task)
            else:
                cpu += task.cpu_work / tables.mean_core_speed
    return gpu / CAPACITY_SAMPLES, cpu / CAPACITY_SAMPLES


def _llm_gpu_seconds(tables: ClusterTables, m: int, task: TaskInstance) -> float:
    prompt, out = task.prompt_tokens, max(1, task.output_tokens)
    ctx = prompt + out // 2
    b = REFERENCE_BATCH
    costs = []
    for k, eng in enumerate(tables.engines):
        if eng.model != MODEL_NAMES[m]:
            continue
        per_token = tables.decode_lin[k, b] / b + tables.decode_attn[k] * ctx
        costs.append(eng.tp * (eng.prefill_s(prompt) + out * per_token))
    return float(np.mean(costs)) if costs else 0.0


def capacity(tables: ClusterTables, source: WorkflowSource, spec: str | None = None) -> float:
    """Nominal capacity in workflows per second (see the module docstring); ``spec`` (the
    workload's preset name or path) keys the cache, as two files may share a name."""
    gpu_demand, cpu_demand = _cached_demand(tables, source, spec or source.name)
    gpus = float(tables.gpus.sum())
    cores = float(tables.cores.sum())
    gpu_time = gpu_demand / gpus if gpus > 0 else (np.inf if gpu_demand > 0 else 0.0)
    cpu_time = cpu_demand / cores
    bottleneck = max(gpu_time, cpu_time)
    if bottleneck <= 0:
        return np.inf
    return float(1.0 / bottleneck)


_demand_cache: dict[tuple[object, ...], tuple[float, float]] = {}


def _cached_demand(tables: ClusterTables, source: WorkflowSource, spec: str) -> tuple[float, float]:
    # Demand depends on the cluster only through its engine classes and core speed.
    classes = tuple((e.model, e.gpu_type, e.tp) for e in tables.engines)
    key = (classes, tables.mean_core_speed, spec)
    if key not in _demand_cache:
        _demand_cache[key] = workflow_demand(tables, source)
    return _demand_cache[key]


def arrival_times(scenario: Scenario, rate: float) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence([scenario.seed, 1]))
    kind = scenario.arrivals
    if kind == "poisson":
        return poisson_arrivals(rate, scenario.workflows, rng)
    if kind == "bursty":
        return bursty_arrivals(rate, scenario.workflows, rng)
    if kind.startswith("replay:"):
        times = load_arrival_times(kind.removeprefix("replay:"))
        return np.asarray(times[: scenario.workflows], dtype=float)
    raise InputError(
        "--arrivals", "arrivals", f"unknown process {kind!r}; use poisson, bursty or replay:PATH"
    )


def build_jobs(tables: ClusterTables, scenario: Scenario) -> list[Job]:
    """The jobs of a scenario: identical for every policy given the same seed."""
    if scenario.workflows <= 0:
        raise InputError("--workflows", "workflows", "must be a positive count")
    source = get_workload(scenario.workload)
    if scenario.rate is not None:
        if scenario.rate <= 0:
            raise InputError("--rate", "rate", "must be positive")
        rate = scenario.rate
    else:
        if scenario.load <= 0:
            raise InputError("--load", "load", "must be positive")
        rate = scenario.load * capacity(tables, source, scenario.workload)
    times = arrival_times(scenario, rate)
    return sample_jobs(source, [float(t) for t in times], scenario.seed)
