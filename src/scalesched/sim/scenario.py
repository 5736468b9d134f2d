"""From a few user-facing settings (cluster, workload, load, seed) to the jobs of a run.

``--load`` is a fraction of the cluster's *measured* capacity for the workload (the highest
rate the best heuristic keeps up with, :mod:`scalesched.runs.capacity`); ``--rate`` sets
workflows/s directly. Workload specs stay free of execution details: capacity is resolved
from the cluster and the workload together, by the caller (measuring it runs policies, which
the simulator does not import; :mod:`scalesched.runs.setup` resolves it and passes it here).

``nominal_capacity`` is the older analytic estimate, kept to seed the measurement's search:
``1 / max(D_gpu / G, D_cpu / C)``, where G is the cluster's GPU count, C its core count,
D_gpu the mean GPU-seconds of one workflow's LLM tasks when served at a reference batch of
``REFERENCE_BATCH`` (prefill + output x the per-request share of a decode step, times the
engine's GPU count, averaged over the engine classes (model, GPU type, tp) that can run it)
and D_cpu the mean core-seconds of its tool tasks, over ``CAPACITY_SAMPLES`` workflows
drawn with a fixed seed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.errors import InputError
from scalesched.kernel.ledger import StreamedJobs
from scalesched.workload.arrivals import (
    MAX_ARRIVAL_S,
    arrival_shapes,
    bursty_arrivals,
    load_arrival_times,
    poisson_arrivals,
    replay_arrivals,
    shaped_arrivals,
)
from scalesched.workload.instance import Job, TaskInstance
from scalesched.workload.source import WorkflowSource, get_workload, sample_jobs, workflow_rng

REFERENCE_BATCH = 16
CAPACITY_SAMPLES = 200
CAPACITY_SEED = 20260

ArrivalKind = Literal["poisson", "bursty", "azure-conv", "azure-code"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """What to run: the workload side of a simulation (the cluster comes separately)."""

    workload: str = "agentic-mix"
    workflows: int = 200
    load: float = 0.7
    """Arrival rate as a fraction of the cluster's measured capacity (ignored with ``rate``)."""
    rate: float | None = None
    """Workflows per second; overrides ``load``."""
    arrivals: str = "poisson"
    """``poisson``, ``bursty``, a production hour's rate shape (``azure-conv``,
    ``azure-code``: :func:`scalesched.workload.arrivals.shaped_arrivals`) or
    ``replay:PATH`` (a file of arrival times)."""
    seed: int = 0
    tool_repeat: float = 0.0
    """Probability that a tool task repeats an earlier identical call of its workflow
    (``scalesched.workload.repeats``); 0: no repeats, the workload as before."""
    residency: str = "dynamic"
    """The world the run is set up in (``scalesched.runs.world``): ``planned`` runs on a
    deployment planned for the offered rate, ``load`` a fraction of that world's capacity
    (every command's default); ``dynamic`` loads models on demand. The jobs are the same in
    both for a given rate and seed."""


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


def nominal_capacity(
    tables: ClusterTables, source: WorkflowSource, spec: str | None = None
) -> float:
    """Analytic capacity in workflows per second (see the module docstring); ``spec`` (the
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
    if kind in arrival_shapes():
        return shaped_arrivals(rate, scenario.workflows, rng, kind)
    if kind.startswith("replay:"):
        path = kind.removeprefix("replay:")
        times = load_arrival_times(path)
        if times.size < scenario.workflows:
            raise InputError(
                path,
                "times",
                f"holds {times.size} arrival times but --workflows is {scenario.workflows}; "
                "give as many times as workflows, or fewer workflows",
            )
        return _check_replay_prefix(path, times[: scenario.workflows])
    known = ", ".join(("poisson", "bursty", *arrival_shapes()))
    raise InputError(
        "--arrivals", "arrivals", f"unknown process {kind!r}; use {known} or replay:PATH"
    )


def check_arrivals(arrivals: str, workflows: int) -> None:
    """Raise the one-line error :func:`arrival_times` would, before any run starts (a study
    spreads its runs over workers; a misspelt process should not fail in each of them)."""
    arrival_times(Scenario(workflows=workflows, arrivals=arrivals), rate=1.0)


def _check_replay_prefix(path: str, used: np.ndarray) -> np.ndarray:
    """The replayed times a run uses (the first ``--workflows``), refused unless they offer a
    positive, finite rate: a file whose later times differ but whose used prefix is all one
    instant would otherwise report an offered rate of 0 (or infinity, for a prefix spread
    over a denormal span). One workflow offers no rate whatever the process, so passes."""
    used = np.asarray(used, dtype=float)
    if used.size < 2:
        return used
    span = float(used[-1] - used[0])
    rate = (used.size - 1) / span if span > 0 else 0.0
    if not (math.isfinite(rate) and rate > 0):
        spread = f"are all {used[0]:g} s" if span == 0 else f"span only {span:g} s"
        raise InputError(
            path,
            "times",
            f"the first {used.size} arrival times (those --workflows {used.size} uses) "
            f"{spread}: they offer no finite arrival rate; give times spread over them, "
            "or more workflows",
        )
    return used


class JobStream(StreamedJobs):
    """The jobs of a scenario, each realised only when asked for: the same jobs as
    :func:`build_jobs` (workflow ``i`` comes from its own generator, ``workflow_rng(seed,
    i)``, whatever order they are asked in), holding 8 bytes per workflow (its arrival)."""

    def __init__(self, source: WorkflowSource, arrivals: np.ndarray, seed: int) -> None:
        self.source, self.seed = source, int(seed)
        self.arrivals = replay_arrivals(arrivals)  # checked as ``sample_jobs`` checks them

    def job(self, i: int) -> Job:
        w = self.source.sample(workflow_rng(self.seed, i))  # as in ``sample_jobs``
        w = dataclasses.replace(w, name=f"{w.pattern}-{i}")
        return Job(workflow_id=i, arrival=float(self.arrivals[i]), workflow=w)


def build_jobs(
    tables: ClusterTables, scenario: Scenario, *, capacity_wps: float | None = None
) -> list[Job]:
    """The jobs of a scenario: identical for every policy given the same seed.

    A ``load`` scenario needs the cluster's measured ``capacity_wps``, which the simulator
    does not measure itself (that runs policies): callers resolve it first, as
    :func:`scalesched.runs.setup.build_jobs` does."""
    source, times = _arrivals_checked(tables, scenario, capacity_wps)
    return sample_jobs(source, [float(t) for t in times], scenario.seed)


def stream_jobs(
    tables: ClusterTables, scenario: Scenario, *, capacity_wps: float | None = None
) -> JobStream:
    """:func:`build_jobs` realised lazily: the simulator builds each job at its arrival and
    drops it when done, so memory follows the workflows in flight, not the run's length
    (no cap on the run's total tasks, which exists for memory)."""
    source, times = _arrivals_checked(tables, scenario, capacity_wps)
    return JobStream(source, times, scenario.seed)


def _arrivals_checked(
    tables: ClusterTables, scenario: Scenario, capacity_wps: float | None
) -> tuple[WorkflowSource, np.ndarray]:
    """The workload and its arrival times, every setting checked (see ``build_jobs``)."""
    source = check_load(tables, scenario)
    if scenario.rate is not None:
        rate = scenario.rate
    else:
        if capacity_wps is None:
            raise ValueError(
                "a --load scenario needs the cluster's capacity: use "
                "scalesched.runs.setup.build_jobs, or pass capacity_wps"
            )
        rate = scenario.load * capacity_wps
    if not math.isfinite(rate) or rate <= 0:
        raise _no_capacity(tables, source, scenario, rate)
    times = arrival_times(scenario, rate)
    if times.size and not times[-1] <= MAX_ARRIVAL_S:
        given = "--rate" if scenario.rate is not None else "--load"
        raise InputError(
            given,
            given.lstrip("-"),
            f"arrivals would span {times[-1]:.3g} s, beyond {MAX_ARRIVAL_S:g} s: raise the "
            "rate or lower --workflows",
        )
    return source, times


def check_load(tables: ClusterTables, scenario: Scenario) -> WorkflowSource:
    """Counts, seed, rate or load in range and, for ``--load``, every model runnable
    somewhere (else capacity is undefined); returns the workload."""
    _check_counts(scenario)
    source = get_workload(scenario.workload)
    if scenario.tool_repeat != 0:  # the plain workload otherwise: not even a wrapper
        from scalesched.workload.repeats import RepeatSource

        source = RepeatSource(source, scenario.tool_repeat)
    if scenario.rate is not None:
        if scenario.rate <= 0:
            raise InputError("--rate", "rate", "must be positive")
    else:
        if scenario.load <= 0:
            raise InputError("--load", "load", "must be positive")
        _require_models_fit(tables, source, scenario)
    return source


MAX_WORKFLOWS = 1_000_000
"""Most workflows of one run (their arrival times are drawn before the run starts)."""
MAX_SEED = 2**63 - 1


def _check_counts(scenario: Scenario) -> None:
    """Workflow count and seed in their documented ranges (before anything is built)."""
    n = scenario.workflows
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_WORKFLOWS:
        raise InputError("--workflows", "workflows", f"must be in [1, {MAX_WORKFLOWS}], got {n}")
    s = scenario.seed
    if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= MAX_SEED:
        raise InputError("--seed", "seed", f"must be an integer in [0, 2**63 - 1], got {s}")
    if scenario.rate is not None and not (math.isfinite(scenario.rate) and scenario.rate > 0):
        raise InputError("--rate", "rate", f"must be a positive finite number, got {scenario.rate}")
    if scenario.rate is None and not (math.isfinite(scenario.load) and scenario.load > 0):
        raise InputError("--load", "load", f"must be a positive finite number, got {scenario.load}")


def _require_models_fit(tables: ClusterTables, source: WorkflowSource, scenario: Scenario) -> None:
    """``--load`` scales the cluster's capacity, which a model no server can run leaves
    undefined: name the workload file and the task."""
    feasible = {e.model for e in tables.engines}
    wf = source.sample(np.random.default_rng(CAPACITY_SEED))
    for task in wf.tasks:
        if task.kind == "llm" and task.model not in feasible:
            raise InputError(
                scenario.workload,
                f"task {task.id!r} model",
                f"no server can run model {task.model!r} on {tables.spec.name}, so --load has "
                "no capacity to scale",
            )


def _no_capacity(
    tables: ClusterTables, source: WorkflowSource, scenario: Scenario, rate: float
) -> InputError:
    """Why ``--load`` gives no usable rate, naming the workload."""
    need = "no GPU or CPU work" if rate > 0 else "more work than it can ever serve"
    return InputError(
        scenario.workload,
        "tasks",
        f"its workflows need {need} on {tables.spec.name}, so --load gives no arrival rate "
        f"({rate:g}/s); give --rate",
    )


STREAM_FROM = 10_000
"""Runs of this many workflows or more stream by default (up front, 10^4 workflows of
agentic-mix hold about 90 MB of realised jobs and per-task state)."""


def streams_by_default(scenario: Scenario) -> bool:
    return scenario.workflows >= STREAM_FROM
