"""The measurement window: warm-up and cool-down excluded, and the steady-state verdict."""

from __future__ import annotations

import numpy as np

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.kernel.metrics import measurement_window, window_bounds
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.run import simulate


def test_window_bounds_keep_at_least_one_workflow() -> None:
    assert window_bounds(100, 20, 10) == (20, 89)
    assert window_bounds(5, 10, 10) == (4, 4)
    assert window_bounds(1, 0, 0) == (0, 0)


def _stream(rate: float, service: float, n: int = 2000, seed: int = 0) -> tuple[np.ndarray, ...]:
    """A single FIFO server (M/D/1): response times grow without bound when rate > 1/service."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    free = 0.0
    ends = np.empty(n)
    for i, a in enumerate(arrivals):
        free = max(free, a) + service
        ends[i] = free
    return arrivals, ends - arrivals


def test_a_stable_queue_is_steady_and_an_overloaded_one_is_not() -> None:
    arrivals, rt = _stream(rate=0.7, service=1.0)
    stable = measurement_window(arrivals, rt, warmup=400, cooldown=200)
    assert stable.steady
    assert abs(stable.throughput / stable.offered_rate - 1) < 0.05

    arrivals, rt = _stream(rate=1.2, service=1.0)
    overloaded = measurement_window(arrivals, rt, warmup=400, cooldown=200)
    assert not overloaded.steady
    assert overloaded.throughput < 0.9 * overloaded.offered_rate
    assert overloaded.trend > 1.5


def test_too_few_measured_workflows_get_no_steady_verdict() -> None:
    arrivals, rt = _stream(rate=0.5, service=1.0, n=30)
    assert not measurement_window(arrivals, rt, warmup=5, cooldown=5).steady


def test_simulate_excludes_warmup_and_cooldown_from_the_metrics() -> None:
    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=300, rate=1.0, seed=3))
    full = simulate(spec, jobs, get_policy("eft"), tables=tables)
    windowed = simulate(spec, jobs, get_policy("eft"), tables=tables, warmup=60, cooldown=30)
    m = windowed.metrics
    assert (m["warmup_workflows"], m["cooldown_workflows"], m["measured_workflows"]) == (
        60,
        30,
        210,
    )
    # Same run, same per-workflow responses: the window's mean is the mean of those 210.
    assert windowed.response_times.size == 210
    assert np.isclose(m["avg_response_time_s"], windowed.response_times.mean())
    assert set(np.round(windowed.response_times, 9)) <= set(np.round(full.response_times, 9))
    assert full.metrics["measured_workflows"] == 300
    for key in ("mean_gpu_utilization", "mean_in_system", "throughput_wps"):
        assert np.isfinite(m[key]) and m[key] > 0
