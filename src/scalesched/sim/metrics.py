"""The metrics of one run, from plain arrays: shared by the simulator and the Ray runtime,
so both report the same keys computed the same way."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class RunRecord:
    """What a run measured; every array is per workflow, per task or per server."""

    policy: str
    cluster: str
    response_times: np.ndarray
    """Per workflow; NaN for one that did not complete."""
    lower_bounds: np.ndarray
    """Per workflow: the contention-free lower bound of its response time."""
    makespan_s: float
    gpu_utilisation: np.ndarray
    cpu_utilisation: np.ndarray
    has_gpu: np.ndarray
    queue_delays: np.ndarray
    """Per started task: seconds from landing on its server to starting."""
    tasks_completed: int
    model_loads: int
    bytes_moved: float
    decisions: int
    events: int
    wall_s: float


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else 0.0


def run_metrics(r: RunRecord) -> dict[str, float | int | str]:
    """The JSON object of ``simulate --json`` (see the README for the keys)."""
    done = ~np.isnan(r.response_times)
    rt = r.response_times[done]
    lb = r.lower_bounds[done]
    mean_rt = float(rt.mean()) if rt.size else 0.0
    mean_lb = float(lb.mean()) if lb.size else 0.0
    per_server = np.where(r.has_gpu, r.gpu_utilisation, r.cpu_utilisation)
    qd = r.queue_delays
    return {
        "policy": r.policy,
        "cluster": r.cluster,
        "n_servers": int(r.has_gpu.size),
        "workflows_submitted": int(r.response_times.size),
        "workflows_completed": int(done.sum()),
        "tasks_completed": r.tasks_completed,
        "avg_response_time_s": mean_rt,
        "p50_response_time_s": _pct(rt, 50),
        "p95_response_time_s": _pct(rt, 95),
        "p99_response_time_s": _pct(rt, 99),
        "makespan_s": float(r.makespan_s),
        "throughput_wps": float(done.sum() / r.makespan_s) if r.makespan_s > 0 else 0.0,
        "mean_utilization": float(per_server.mean()) if per_server.size else 0.0,
        "mean_gpu_utilization": float(r.gpu_utilisation[r.has_gpu].mean())
        if r.has_gpu.any()
        else 0.0,
        "mean_cpu_utilization": float(r.cpu_utilisation.mean()) if r.cpu_utilisation.size else 0.0,
        "mean_queue_delay_s": float(qd.mean()) if qd.size else 0.0,
        "p95_queue_delay_s": _pct(qd, 95),
        "model_loads": r.model_loads,
        "bytes_moved": float(r.bytes_moved),
        "decisions": r.decisions,
        "events": r.events,
        "mean_lower_bound_s": mean_lb,
        "lower_bound_ratio": mean_rt / mean_lb if mean_lb > 0 else 0.0,
        "sim_wall_time_s": r.wall_s,
    }
