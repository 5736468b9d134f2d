"""Run a scheduler over a list of jobs and summarise what happened."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.decision.scheduler import Scheduler
from scalesched.kernel.metrics import run_metrics_and_window
from scalesched.kernel.records import TaskRecord
from scalesched.sim.compiled_loop import run_loop
from scalesched.sim.compiled_run import run_compiled
from scalesched.sim.engine import Simulation
from scalesched.sim.trace import TraceWriter
from scalesched.workload.instance import Job


@dataclass(slots=True)
class SimResult:
    """Metrics of one run, plus the raw arrays they came from."""

    metrics: dict[str, float | int | str]
    response_times: np.ndarray
    lower_bounds: np.ndarray
    gpu_utilisation: np.ndarray
    cpu_utilisation: np.ndarray
    server_names: list[str]
    trace: list[TaskRecord] = field(default_factory=list)
    """Every task's record with ``record_trace`` (empty when written to ``trace_path``)."""
    series: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Every workflow's response time before the run-out, in arrival order (NaN: never
    finished): what a study needs to give policies compared on the same workflows one
    shared warm-up cut and paired batch means (``scalesched.eval.windows``)."""
    series_lower_bounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The lower bounds of ``series``' workflows."""
    series_any_deployment_bounds: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """The world-independent bounds of ``series``' workflows."""


def simulate(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    scheduler: Scheduler,
    *,
    seed: int = 0,
    record_trace: bool = False,
    tables: ClusterTables | None = None,
    on_workflow_done: Callable[[int], None] | None = None,
    warmup: int | None = 0,
    cooldown: int = 0,
    trace_path: Path | None = None,
    kv_policy: str | None = None,
    tool_cache: bool = False,
    logits_cache: bool | None = None,
) -> SimResult:
    """Simulate ``jobs`` on ``cluster`` with every ready task placed by ``scheduler``; the
    first ``warmup`` (None: as many as MSER finds) and last ``cooldown`` workflows (in
    arrival order) are run but left out of the metrics (see ``scalesched.kernel.metrics``).

    ``jobs`` given as ``StreamedJobs`` (``scalesched.sim.scenario.stream_jobs``) are realised
    at arrival and retired when done: same results, memory bounded by what is in flight.
    ``trace_path`` writes the trace there row by row as tasks finish (nothing kept);
    ``record_trace`` keeps every record in ``SimResult.trace`` instead. ``kv_policy``
    (``scalesched.cache.kv``) keeps KV state across calls; None: memoryless engines.
    ``tool_cache`` lets repeated tool calls reuse their original's result
    (``scalesched.sim.tool_cache``). ``logits_cache`` True lets re-sampled branches reuse
    their group's logits, False only measures them (``scalesched.sim.logits_cache``)."""
    sink: TraceWriter | None = None
    with ExitStack() as stack:
        if trace_path is not None:
            names = (tables if tables is not None else ClusterTables(cluster)).names
            sink = stack.enter_context(TraceWriter(trace_path, names))
        wall = time.perf_counter()
        sim = Simulation(
            cluster,
            jobs,
            ready_order=scheduler.ready_order,
            record_trace=record_trace and sink is None,
            tables=tables,
            on_workflow_done=on_workflow_done,
            warmup=warmup,
            cooldown=cooldown,
            trace_sink=sink,
            kv_policy=kv_policy,
            tool_cache=tool_cache,
            logits_cache=logits_cache,
        )
        return _drive(sim, scheduler, seed, wall)


def _drive(sim: Simulation, scheduler: Scheduler, seed: int, wall: float) -> SimResult:
    scheduler.reset(seed)
    run_to_end(sim, scheduler)
    return summarise(sim, policy=scheduler.name, wall_s=time.perf_counter() - wall)


def run_to_end(sim: Simulation, scheduler: Scheduler) -> None:
    """Run ``sim`` to its end with ``scheduler`` placing every task, as fast as the core
    allows: a whole run in C++ where the core has the policy's twin
    (``sim.compiled_run``); else the events in C++ and the policy in Python where the core
    covers the run (``sim.compiled_loop``); else the Python engine's loop. The same run
    each way."""
    if not run_compiled(sim, scheduler) and not run_loop(sim, scheduler):
        drive(sim, scheduler)


def summarise(sim: Simulation, *, policy: str, wall_s: float) -> SimResult:
    sim.accounts.close()
    rt = sim.response_times
    done = ~np.isnan(rt)
    first = sim.arrival_time(0) if sim.n_jobs else 0.0  # arrivals are sorted
    makespan = sim.now - first if sim.n_jobs else 0.0
    gpu, cpu = sim.accounts.utilisation(makespan)
    metrics, window = run_metrics_and_window(
        sim.run_record(
            policy=policy,
            cluster=sim.cluster.name,
            makespan_s=makespan,
            utilisation=(gpu, cpu),
            wall_s=wall_s,
            arrivals=sim.arrivals,
            warmup=sim.warmup,
            cooldown=sim.cooldown,
            window_utilisation=sim.accounts.window_utilisation(),
            in_system_area=sim.accounts.window_in_system_area(),
        )
    )
    if sim._redeploy.requests:
        metrics.update(sim._redeploy.metrics())
    # The raw arrays cover the measurement window only, like the metrics.
    done &= window.measured
    rt_done = rt[done]
    lb = sim.lower_bounds[done]
    before_runout = rt.size - min(sim.cooldown, rt.size)  # arrivals are sorted by index
    return SimResult(
        metrics=metrics,
        response_times=rt_done,
        lower_bounds=lb,
        gpu_utilisation=gpu,
        cpu_utilisation=cpu,
        server_names=list(sim.tables.names),
        trace=sim.trace,
        series=np.array(rt[:before_runout]),
        series_lower_bounds=np.array(sim.lower_bounds[:before_runout]),
        series_any_deployment_bounds=np.array(sim.any_deployment_bounds[:before_runout]),
    )


def drive_simulation(sim: Simulation, scheduler: Scheduler, *, seed: int = 0) -> SimResult:
    """Run a :class:`Simulation` the caller built, with ``scheduler`` placing every task,
    and summarise it as :func:`simulate` does. For studies that read the engine's records
    afterwards (``sim.run_record(...).logits``), which ``SimResult`` does not carry."""
    return _drive(sim, scheduler, seed, time.perf_counter())
