"""The metrics of one run, from plain arrays: shared by the simulator and the Ray runtime,
so both report the same keys computed the same way.

Steady state: the first ``warmup`` workflows (in arrival order) fill an empty cluster and the
last ``cooldown`` ones run while arrivals stop and the cluster drains; both are excluded.
Response-time, queue-delay and utilisation figures cover the *measurement window* from the
arrival of the first measured workflow to the arrival of the last one. A run is judged to have
reached steady state when, inside that window, completions keep pace with arrivals
(throughput >= ``STEADY_THROUGHPUT_RATIO`` x the offered rate) and response times do not
grow (mean of the last quarter of measured workflows <= ``STEADY_MAX_TREND`` x the mean of
the first quarter). Both fail when queues grow without bound (overload) or when the run is
too short to leave the cold-start transient.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def packed(buf: array, dtype: type) -> np.ndarray:  # type: ignore[type-arg]
    """A copy of a run's ``array.array`` of measurements as numpy (empty when nothing was
    measured): the simulator collects per-event figures in compact arrays."""
    return np.frombuffer(buf, dtype=dtype).copy() if len(buf) else np.zeros(0, dtype=dtype)


@dataclass(frozen=True, slots=True)
class KVRecord:
    """What a run with KV state (``--kv-policy``) measured of its LLM calls; the per-call
    arrays run in admission order, each call with the index of its workflow."""

    policy: str
    call_jobs: np.ndarray
    prompt_tokens: np.ndarray
    cached_tokens: np.ndarray
    """Per call: prompt tokens whose prefill the prefix cache skipped."""
    ttft_jobs: np.ndarray
    ttft_s: np.ndarray
    """Per call that finished its prefill: seconds from landing on its server to the first
    token (admission wait + prefill)."""
    reentry_agents: np.ndarray
    """Per re-entry (a call that extends an earlier call's context): its agent's id."""
    reentry_jobs: np.ndarray
    reentry_miss: np.ndarray
    """Per re-entry: whether the context it extends was not in its engine's cache."""
    reentry_moved: np.ndarray
    """Per re-entry: whether it was placed on another server than its context (a miss no
    eviction policy can prevent)."""
    evicted_tokens: int
    """Tokens the run evicted from prefix caches (and lost with unloaded engines)."""


@dataclass(frozen=True, slots=True)
class LogitsRecord:
    """What a run measured of its re-sampled branches (``--logits-cache``, module
    ``scalesched.sim.logits_cache``); the per-branch arrays run in finishing order."""

    reuse: bool
    """False: measured only (the cache off), nothing was reused."""
    jobs: np.ndarray
    first: np.ndarray
    """Per branch: index of its group's first path in its workflow (the group's key)."""
    output_tokens: np.ndarray
    repeat_tokens: np.ndarray
    """Per branch: tokens it repeats of its group's first path (0 for the first path)."""
    reused_tokens: np.ndarray
    """Per branch: tokens it did not decode itself (taken from stored logits or ridden)."""
    admitted_s: np.ndarray
    """Per branch: when it was admitted to its engine's batch."""
    finished_s: np.ndarray
    """Per branch: when it produced its last token."""
    peak_tokens: int
    """Most KV tokens the stored logits took at once, all engines together."""
    dropped: int
    """Rows not stored for want of free KV memory."""


def logits_metrics(lg: LogitsRecord, measured: np.ndarray) -> dict[str, float | int]:
    """Branch figures over the measured workflows."""
    keep = measured[lg.jobs] if lg.jobs.size else np.zeros(0, dtype=bool)
    out = float(lg.output_tokens[keep].sum())
    service = lg.finished_s[keep] - lg.admitted_s[keep]
    return {
        "branch_calls": int(keep.sum()),
        "branch_repeat_frac": float(lg.repeat_tokens[keep].sum()) / out if out else 0.0,
        "branch_reused_frac": float(lg.reused_tokens[keep].sum()) / out if out else 0.0,
        "branch_service_mean_s": float(service.mean()) if service.size else 0.0,
        "logits_peak_kv_tokens": int(lg.peak_tokens),
        "logits_dropped": int(lg.dropped),
    }


HOTSPOT_SHARE = 0.9
"""Hotspot agents: re-entered agents that were re-entered more often than at least this
share of the re-entered agents (the top decile; agents with equal counts share a verdict,
so there may be fewer than a tenth, or none when most agents tie at the top)."""


def kv_metrics(kv: KVRecord, measured: np.ndarray) -> dict[str, float | int | str]:
    """The cache keys of ``simulate --json`` over the measured workflows (``measured``:
    bool per workflow); see docs/cache.md for the definitions."""
    calls = measured[kv.call_jobs] if kv.call_jobs.size else np.zeros(0, dtype=bool)
    prompt = float(kv.prompt_tokens[calls].sum())
    ttft = kv.ttft_s[measured[kv.ttft_jobs]] if kv.ttft_jobs.size else np.zeros(0)
    re = measured[kv.reentry_jobs] if kv.reentry_jobs.size else np.zeros(0, dtype=bool)
    agents, miss, moved = kv.reentry_agents[re], kv.reentry_miss[re], kv.reentry_moved[re]
    hot_rate = hot_kept = 0.0
    n_hot = 0
    if agents.size:
        _, inverse, counts = np.unique(agents, return_inverse=True, return_counts=True)
        fewer = np.searchsorted(np.sort(counts), counts, side="left")  # agents re-entered less
        hot = fewer >= HOTSPOT_SHARE * counts.size
        n_hot = int(hot.sum())
        hot_calls = hot[inverse]
        hot_rate = float(miss[hot_calls].mean()) if hot_calls.any() else 0.0
        stayed = hot_calls & ~moved
        hot_kept = float(miss[stayed].mean()) if stayed.any() else 0.0
    return {
        "kv_policy": kv.policy,
        "prefix_hit_rate": float(kv.cached_tokens[calls].sum()) / prompt if prompt > 0 else 0.0,
        "ttft_mean_s": _exact_mean(ttft),
        "ttft_p95_s": _pct(ttft, 95),
        "evicted_tokens": int(kv.evicted_tokens),
        "reentry_miss_rate": float(miss.mean()) if miss.size else 0.0,
        "reentry_moved_rate": float(moved.mean()) if moved.size else 0.0,
        "hotspot_agents": n_hot,
        "hotspot_miss_rate": hot_rate,
        "hotspot_stay_miss_rate": hot_kept,
    }


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
    """Per started task: seconds from landing on its server to starting (any order: the
    metrics depend on the values only)."""
    tasks_completed: int
    model_loads: int
    bytes_moved: float
    decisions: int
    events: int
    wall_s: float
    arrivals: np.ndarray | None = None
    """Per workflow, in the order of ``response_times``; needed for the window metrics."""
    warmup: int = 0
    """Workflows (in arrival order) excluded from the metrics as warm-up."""
    cooldown: int = 0
    """The last workflows (in arrival order) excluded as cool-down (arrivals stop)."""
    queue_delay_jobs: np.ndarray | None = None
    """Per entry of ``queue_delays``: the index of its workflow (to drop warm-up tasks)."""
    window_utilisation: tuple[np.ndarray, np.ndarray] | None = None
    """(GPU, CPU) busy fractions per server over the measurement window, when known."""
    in_system_area: float | None = None
    """Workflow-seconds spent in the system during the measurement window."""
    hedged_tasks: int = 0
    """Tasks launched on more than one server (``Hedge``)."""
    extra_server_seconds: float = 0.0
    """Server time of cancelled hedge copies (see ``Simulation.extra_server_seconds``)."""
    deferrals: int = 0
    """Times a scheduler answered ``Defer``."""
    kv: KVRecord | None = None
    """The KV-cache measurements of a run with ``--kv-policy`` (None: engines kept no KV)."""
    tool_cache: tuple[np.ndarray, np.ndarray] | None = None
    """A ``--tool-cache on`` run's hits: (job index, tool-seconds saved) per hit
    (``scalesched.sim.tool_cache``); None: no tool cache."""
    logits: LogitsRecord | None = None
    """The re-sampled branches of a run with ``--logits-cache`` (None: not measured)."""
    replicas: tuple[int, int, int, int, float] | None = None
    """A run whose scheduler asked for replicas (``LoadReplica``): (requests, loads,
    releases, LLM calls that landed on a replica, GPU-seconds the replicas held from load
    start to unload); None: it never asked."""


STEADY_THROUGHPUT_RATIO = 0.95
STEADY_MAX_TREND = 1.5
MIN_MEASURED_FOR_VERDICT = 40
"""Fewer measured workflows than this are too few to judge steady state (verdict False)."""


@dataclass(frozen=True, slots=True)
class Window:
    """The measurement window of a run and the steady-state verdict on it."""

    start: float
    end: float
    measured: np.ndarray
    """Bool per workflow: arrived after the warm-up."""
    offered_rate: float
    throughput: float
    trend: float
    steady: bool


def window_bounds(n: int, warmup: int, cooldown: int) -> tuple[int, int]:
    """First and last measured index (arrival order) of ``n`` workflows; at least one."""
    first = min(max(warmup, 0), max(n - 1, 0))
    last = max(first, n - 1 - max(cooldown, 0))
    return first, last


def measurement_window(
    arrivals: np.ndarray, response_times: np.ndarray, warmup: int, cooldown: int = 0
) -> Window:
    """The window between warm-up and cool-down, and whether the run was at steady state."""
    n = arrivals.size
    order = np.argsort(arrivals, kind="stable")
    measured = np.zeros(n, dtype=bool)
    if n == 0:
        return Window(0.0, 0.0, measured, 0.0, 0.0, 1.0, False)
    first, last = window_bounds(n, warmup, cooldown)
    measured[order[first : last + 1]] = True
    start, end = float(arrivals[order[first]]), float(arrivals[order[last]])
    span = end - start
    n_measured = int(measured.sum())
    ends = arrivals + response_times
    if span > 0:
        offered = (n_measured - 1) / span
        done_in = np.isfinite(ends) & (ends >= start) & (ends <= end)
        throughput = float(done_in.sum()) / span
    else:
        offered = throughput = 0.0
    rt = response_times[order[first : last + 1]]
    q = max(1, rt.size // 4)
    head, tail = rt[:q], rt[-q:]
    finite = np.isfinite(head).all() and np.isfinite(tail).all()
    trend = float(tail.mean() / head.mean()) if finite and head.mean() > 0 else float("inf")
    steady = (
        n_measured >= MIN_MEASURED_FOR_VERDICT
        and throughput >= STEADY_THROUGHPUT_RATIO * offered
        and trend <= STEADY_MAX_TREND
    )
    return Window(start, end, measured, offered, throughput, trend, bool(steady))


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if a.size else 0.0


def _exact_mean(a: np.ndarray) -> float:
    """The correctly rounded mean: independent of the order of ``a`` (a streamed run
    collects queue delays as workflows retire, an up-front one by task id)."""
    return math.fsum(a.flat) / a.size if a.size else 0.0  # a.flat: no list of every value


def run_metrics(r: RunRecord) -> dict[str, float | int | str]:
    """The JSON object of ``simulate --json`` (docs/first-run.md lists the keys)."""
    done = ~np.isnan(r.response_times)
    arrivals = r.arrivals if r.arrivals is not None else np.zeros(r.response_times.size)
    window = measurement_window(arrivals, r.response_times, r.warmup, r.cooldown)
    measured = window.measured if r.arrivals is not None else np.ones(done.size, dtype=bool)
    rt = r.response_times[done & measured]
    lb = r.lower_bounds[done & measured]
    # Slowdown: each workflow against its own contention-free bound (the SLO's unit).
    slowdown = rt / np.maximum(lb, 1e-9)
    mean_rt = float(rt.mean()) if rt.size else 0.0
    mean_lb = float(lb.mean()) if lb.size else 0.0
    gpu_u, cpu_u = r.window_utilisation or (r.gpu_utilisation, r.cpu_utilisation)
    per_server = np.where(r.has_gpu, gpu_u, cpu_u)
    qd = r.queue_delays
    if r.queue_delay_jobs is not None and r.arrivals is not None:
        qd = qd[measured[r.queue_delay_jobs]]
    span = window.end - window.start
    if r.arrivals is not None and span > 0:
        throughput = window.throughput
    else:
        throughput = float(done.sum() / r.makespan_s) if r.makespan_s > 0 else 0.0
    metrics: dict[str, float | int | str] = {
        "policy": r.policy,
        "cluster": r.cluster,
        "n_servers": int(r.has_gpu.size),
        "workflows_submitted": int(r.response_times.size),
        "workflows_completed": int(done.sum()),
        "warmup_workflows": int(min(r.warmup, done.size)) if r.arrivals is not None else 0,
        "cooldown_workflows": int(done.size - measured.sum() - min(r.warmup, done.size))
        if r.arrivals is not None
        else 0,
        "measured_workflows": int((done & measured).sum()),
        "tasks_completed": r.tasks_completed,
        "avg_response_time_s": mean_rt,
        "p50_response_time_s": _pct(rt, 50),
        "p95_response_time_s": _pct(rt, 95),
        "p99_response_time_s": _pct(rt, 99),
        "makespan_s": float(r.makespan_s),
        "throughput_wps": throughput,
        "offered_rate_wps": window.offered_rate,
        "response_trend": window.trend if np.isfinite(window.trend) else -1.0,
        "steady_state": window.steady,
        "mean_in_system": r.in_system_area / span
        if r.in_system_area is not None and span > 0
        else 0.0,
        "p99_slowdown": _pct(slowdown, 99),
        "mean_utilization": float(per_server.mean()) if per_server.size else 0.0,
        "mean_gpu_utilization": float(gpu_u[r.has_gpu].mean()) if r.has_gpu.any() else 0.0,
        "mean_cpu_utilization": float(cpu_u.mean()) if cpu_u.size else 0.0,
        "mean_queue_delay_s": _exact_mean(qd),
        "p95_queue_delay_s": _pct(qd, 95),
        "hedged_tasks": r.hedged_tasks,
        "extra_server_seconds": float(r.extra_server_seconds),
        "deferrals": r.deferrals,
        "model_loads": r.model_loads,
        "bytes_moved": float(r.bytes_moved),
        "decisions": r.decisions,
        "events": r.events,
        "mean_lower_bound_s": mean_lb,
        "lower_bound_ratio": mean_rt / mean_lb if mean_lb > 0 else 0.0,
        "sim_wall_time_s": r.wall_s,
    }
    if r.kv is not None:
        metrics.update(kv_metrics(r.kv, measured))
    if r.tool_cache is not None:  # hits of the measured workflows only, like every figure
        jobs, saved = r.tool_cache
        hit = measured[jobs] if jobs.size else np.zeros(0, dtype=bool)
        metrics["tool_cache_hits"] = int(hit.sum())
        metrics["tool_cache_saved_s"] = float(saved[hit].sum())
    if r.logits is not None:
        metrics.update(logits_metrics(r.logits, measured))
    if r.replicas is not None:  # over the whole run, like model_loads
        requests, loads, released, calls, gpu_s = r.replicas
        metrics["replica_requests"] = requests
        metrics["replica_loads"] = loads
        metrics["replica_releases"] = released
        metrics["replica_calls"] = calls
        metrics["replica_gpu_seconds"] = float(gpu_s)
    return metrics


def steady_state_note(metrics: dict[str, float | int | str]) -> str:
    """Why a run was not judged steady, in one line for the user."""
    if int(metrics["measured_workflows"]) < MIN_MEASURED_FOR_VERDICT:
        return (
            f"the run did not reach a verifiable steady state: only "
            f"{metrics['measured_workflows']} measured workflows (need "
            f"{MIN_MEASURED_FOR_VERDICT}+); use more --workflows"
        )
    return (
        "the run did not reach steady state: the cluster delivered "
        f"{float(metrics['throughput_wps']):.3g} workflows/s against "
        f"{float(metrics['offered_rate_wps']):.3g} offered, response-time trend "
        f"{float(metrics['response_trend']):.3g}x over the window; the load is above what "
        "this policy sustains, or the run is too short"
    )


def whole_run_window(arrivals: Sequence[float], response_times: Any) -> dict[str, Any]:
    """The load and steady-state figures of a run that measures every workflow (the Ray
    runtime, the load generator), from its real arrival times and response times (NaN for a
    workflow that did not complete), computed as the simulator computes them over the
    window from the first to the last arrival: the offered rate, the time-average number of
    workflows in the system (each completed workflow's time inside the window, summed, over
    its length) and the steady-state verdict."""
    arr = np.asarray(arrivals, dtype=float)
    rt = np.asarray(response_times, dtype=float)
    window = measurement_window(arr, rt, 0, 0)
    span = window.end - window.start
    done = np.isfinite(rt)
    inside = np.minimum(arr[done] + rt[done], window.end) - np.maximum(arr[done], window.start)
    return {
        "offered_rate_wps": window.offered_rate,
        "response_trend": window.trend if math.isfinite(window.trend) else -1.0,
        "steady_state": window.steady,
        "mean_in_system": math.fsum(np.maximum(inside, 0.0)) / span if span > 0 else 0.0,
    }
