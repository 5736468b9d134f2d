"""Run a scheduler over a list of jobs and summarise what happened."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.policies.base import Scheduler
from scalesched.policies.features import ClusterTables
from scalesched.sim.engine import Simulation, TaskRecord
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


def simulate(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    scheduler: Scheduler,
    *,
    seed: int = 0,
    record_trace: bool = False,
    tables: ClusterTables | None = None,
    on_workflow_done: Callable[[int], None] | None = None,
) -> SimResult:
    """Simulate ``jobs`` on ``cluster`` with every ready task placed by ``scheduler``."""
    wall = time.perf_counter()
    sim = Simulation(
        cluster,
        jobs,
        ready_order=scheduler.ready_order,
        record_trace=record_trace,
        tables=tables,
        on_workflow_done=on_workflow_done,
    )
    scheduler.reset(seed)
    decision = sim.next_decision()
    while decision is not None:
        sim.apply(scheduler.select(decision))
        decision = sim.next_decision()
    return summarise(sim, policy=scheduler.name, wall_s=time.perf_counter() - wall)


def summarise(sim: Simulation, *, policy: str, wall_s: float) -> SimResult:
    sim.close_accounts()
    rt = sim.response_times
    done = ~np.isnan(rt)
    rt_done = rt[done]
    lb = sim.lower_bounds[done]
    first = min((j.arrival for j in sim.jobs), default=0.0)
    makespan = sim.now - first if sim.jobs else 0.0
    gpu, cpu = sim.utilisation(makespan)
    has_gpu = sim.tables.gpus > 0
    per_server = np.where(has_gpu, gpu, cpu)
    qd = sim.queue_delays

    def pct(a: np.ndarray, q: float) -> float:
        return float(np.percentile(a, q)) if a.size else 0.0

    mean_rt = float(rt_done.mean()) if rt_done.size else 0.0
    mean_lb = float(lb.mean()) if lb.size else 0.0
    metrics: dict[str, float | int | str] = {
        "policy": policy,
        "cluster": sim.cluster.name,
        "n_servers": sim.tables.n,
        "workflows_submitted": len(sim.jobs),
        "workflows_completed": int(done.sum()),
        "tasks_completed": sim.tasks_completed,
        "avg_response_time_s": mean_rt,
        "p50_response_time_s": pct(rt_done, 50),
        "p95_response_time_s": pct(rt_done, 95),
        "p99_response_time_s": pct(rt_done, 99),
        "makespan_s": float(makespan),
        "throughput_wps": float(done.sum() / makespan) if makespan > 0 else 0.0,
        "mean_utilization": float(per_server.mean()),
        "mean_gpu_utilization": float(gpu[has_gpu].mean()) if has_gpu.any() else 0.0,
        "mean_cpu_utilization": float(cpu.mean()),
        "mean_queue_delay_s": float(qd.mean()) if qd.size else 0.0,
        "p95_queue_delay_s": pct(qd, 95),
        "model_loads": sim.model_loads,
        "bytes_moved": float(sim.bytes_moved),
        "decisions": sim.decisions,
        "events": sim.events,
        "mean_lower_bound_s": mean_lb,
        "lower_bound_ratio": mean_rt / mean_lb if mean_lb > 0 else 0.0,
        "sim_wall_time_s": wall_s,
    }
    return SimResult(
        metrics=metrics,
        response_times=rt_done,
        lower_bounds=lb,
        gpu_utilisation=gpu,
        cpu_utilisation=cpu,
        server_names=list(sim.tables.names),
        trace=sim.trace,
    )
