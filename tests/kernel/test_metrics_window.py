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


def test_the_warm_up_is_found_and_a_falling_mean_is_not_steady() -> None:
    arrivals, rt = _stream(rate=0.7, service=1.0, n=4000)
    cold = rt + 60.0 * np.exp(-np.arange(rt.size) / 150.0)  # a cold start, then steady
    found = measurement_window(arrivals, cold, warmup=None, cooldown=400)
    assert found.steady and found.cut_method == "mser"
    assert 300 <= found.cut <= 1800  # past the transient, in the first half
    # The same cold start stretched over the whole run: its mean is still falling.
    falling = rt + 60.0 * np.exp(-np.arange(rt.size) / 3000.0)
    verdict = measurement_window(arrivals, falling, warmup=None, cooldown=400)
    assert not verdict.steady and not verdict.overloaded
    assert any("falling" in r or "second half" in r for r in verdict.reasons)


def test_a_run_with_unfinished_workflows_says_its_warm_up_was_not_searched() -> None:
    arrivals, rt = _stream(rate=0.7, service=1.0)
    rt[1000:1010] = np.inf  # never finished: MSER has nothing to search
    window = measurement_window(arrivals, rt, warmup=None, cooldown=200)
    assert window.cut_method == "nominal" and window.cut > 0


def test_a_run_shorter_than_its_responses_says_so() -> None:
    arrivals = np.linspace(0.0, 16.0, 2000)  # 2000 workflows in 16 s, each taking 30 s
    w = measurement_window(arrivals, np.full(2000, 30.0), warmup=None, cooldown=200)
    assert not w.steady and not w.overloaded
    assert "less than 4 mean responses" in w.reasons[0]


def test_overload_is_marked_so_a_longer_run_is_not_tried() -> None:
    arrivals, rt = _stream(rate=1.2, service=1.0, n=3000)
    w = measurement_window(arrivals, rt, warmup=None, cooldown=300)
    assert not w.steady and w.overloaded
    assert any("rising" in r for r in w.reasons)


def test_a_simulated_overload_is_marked_overloaded() -> None:
    """`random` on a deployment planned for 7.4 workflows/s delivers about 1.7: its queues
    grow, and the verdict must say so (so that `--workflows auto` stops at once)."""
    from scalesched.runs.setup import prepare, run

    setup = prepare("hetero-16", Scenario(workflows=1500, load=0.7, seed=0, residency="planned"))
    m = run(setup, "random").metrics
    assert not m["steady_state"] and m["overloaded"]
    assert float(m["throughput_wps"]) < 0.5 * float(m["offered_rate_wps"])


def test_the_mean_carries_its_batch_means_interval() -> None:
    arrivals, rt = _stream(rate=0.7, service=1.0, n=3000)
    w = measurement_window(arrivals, rt, warmup=None, cooldown=300)
    kept = rt[np.argsort(arrivals)][w.cut : 2700]
    assert np.isclose(w.mean, kept[kept.size % w_batches(w) :].mean())
    assert 0 < w.half_width < 0.2 * w.mean and w.ci_method.startswith("batch means")


def w_batches(w: object) -> int:
    """The batch count a window's interval used, read back from its method text."""
    text = str(w.ci_method)
    return int(text.split("(")[1].split(" batches")[0])


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


def test_an_empty_cluster_filling_up_is_not_a_shortfall() -> None:
    """Flat responses from the first workflow (a deployment: no cold start to cut), and
    many workflows in the system: counted over the same window, completions would trail
    arrivals by the filling; counted one response later they match."""
    rng = np.random.default_rng(1)
    arrivals = np.cumsum(rng.exponential(1 / 8.0, 1500))  # 8 per second
    rt = 24.0 + rng.exponential(2.0, arrivals.size)  # about 200 in the system
    w = measurement_window(arrivals, rt, warmup=None, cooldown=150)
    assert w.cut < 500 and w.throughput < 0.95 * w.offered_rate  # the plain count trails
    assert w.steady, w.reasons


def test_a_rise_the_cluster_keeps_up_with_is_not_called_an_overload() -> None:
    """Responses drifting up by a few seconds while every arrival is served on time (a
    swing in the load, not a queue that grows): not steady, and the reason says the cluster
    keeps up and a longer run is the fix, not a lower load."""
    rng = np.random.default_rng(2)
    arrivals = np.cumsum(rng.exponential(1 / 8.0, 4000))
    rt = 24.0 + rng.exponential(2.0, arrivals.size) + np.linspace(0.0, 3.0, arrivals.size)
    w = measurement_window(arrivals, rt, warmup=None, cooldown=400)
    assert not w.steady and not w.overloaded
    assert "keeps up with the arrivals" in w.reasons[0]
    assert not any("above what this policy sustains" in r for r in w.reasons)
