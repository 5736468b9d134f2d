"""The Aggregate LLM Pipeline predictor, and its error against the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scalesched.plan.pipeline import (
    CONGESTION_SHARE,
    Curves,
    ReplicaConfig,
    mgc_wait,
    mmc_wait,
    model_cost,
    predict,
    service_scv,
)
from scalesched.plan.profile import workload_profile

H1 = ReplicaConfig("H100-80G", 1, 1.0)
H2 = ReplicaConfig("H100-80G", 2, 1.0)
H4 = ReplicaConfig("H100-80G", 4, 1.0)
HQ = ReplicaConfig("H100-80G", 1, 0.5)


@pytest.fixture(scope="module")
def curves():
    return Curves(workload_profile("react", samples=150, seed=3))


def test_replica_curve_is_consistent(curves):
    cv = curves.get("llama-2-7b", H1)
    assert np.all(np.diff(cv.latency) >= 0) and np.all(np.diff(cv.throughput) >= 0)
    # the router's equilibrium: rate rises with the latency it may reach, up to capacity
    levels = np.linspace(cv.latency[0], 3 * cv.latency[-1], 20)
    rates = [cv.rate_at_latency(x) for x in levels]
    assert rates == sorted(rates) and rates[0] == 0.0 and rates[-1] < cv.capacity
    assert cv.capacity == pytest.approx(cv.throughput[-1])
    prev = 0.0
    for frac in (0.01, 0.2, 0.5, 0.8, 0.95, 0.99):
        op = cv.at_rate(frac * cv.capacity)
        assert op is not None and op.latency_s + op.wait_s >= prev
        assert op.utilisation == pytest.approx(frac)
        # Little's law holds on the fluid decoding batch
        lam = frac * cv.capacity
        assert op.batch == pytest.approx(lam * cv.mean_output * op.fluid_step_s, rel=1e-6)
        assert op.latency_s == pytest.approx(cv.prefill_mean_s + cv.mean_output * op.step_s)
        # a call sees the batch-1 step plus CONGESTION_SHARE of the fluid slowdown over it
        step1 = float(cv.step[0])
        seen = step1 + CONGESTION_SHARE * (op.fluid_step_s - step1)
        assert op.step_s == pytest.approx(seen, rel=1e-9)
        assert step1 <= op.step_s <= op.fluid_step_s + 1e-12
        prev = op.latency_s + op.wait_s
    assert cv.at_rate(cv.capacity) is None
    # half a GPU: less capacity, slower requests
    half = curves.get("llama-2-7b", HQ)
    assert half.capacity < cv.capacity and half.latency[0] > cv.latency[0]
    # more KV memory (tp 4) lets a 70b replica batch more
    assert curves.get("llama-2-70b", H4).b_max > curves.get("llama-2-70b", H2).b_max


def test_predict_throughput_and_monotonicity(curves):
    prof = curves.profile
    alloc = {"llama-2-70b": {H2: 2}, "llama-2-7b": {H1: 1}, "phi-2": {HQ: 1}}
    p = predict(curves, alloc, 0.1)
    caps = {m: sum(curves.get(m, c).capacity * n for c, n in a.items()) for m, a in alloc.items()}
    bottleneck = min(caps[m] / prof.calls[m].calls_per_workflow for m in alloc)
    assert p.throughput_wps == pytest.approx(bottleneck)
    assert prof.base_s.mean() < p.mean_s <= p.p95_s < math.inf
    slower = predict(curves, alloc, 0.9 * p.throughput_wps)
    assert slower.mean_s > p.mean_s
    assert math.isinf(predict(curves, alloc, 1.01 * p.throughput_wps).mean_s)
    more = {**alloc, "llama-2-70b": {H2: 3}}
    r = 0.8 * p.throughput_wps
    assert predict(curves, more, r).mean_s < predict(curves, alloc, r).mean_s
    assert model_cost(curves, "llama-2-70b", {H2: 3}, r) < model_cost(
        curves, "llama-2-70b", {H2: 2}, r
    )
    assert math.isinf(predict(curves, {"llama-2-70b": {H2: 2}}, 0.1).mean_s)  # 7b unserved


def test_prediction_tracks_simulation():
    """Predicted mean within 15% of the simulated one for a plan at its rate (light run)."""
    from scalesched.cluster import get_cluster
    from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict
    from scalesched.cluster.tables import ClusterTables
    from scalesched.plan.search import search_plan
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, build_jobs
    from scalesched.sim.run import simulate

    cluster = get_cluster("hetero-8")
    prof = workload_profile("deep-research", samples=200, seed=7)
    plan = search_plan(cluster, prof, 1.0)
    dep = deployment_from_dict(deployment_to_dict("p", cluster.name, plan.replicas), cluster, "p")
    jobs = build_jobs(
        ClusterTables(cluster), Scenario(workload="deep-research", workflows=250, rate=1.0, seed=4)
    )
    res = simulate(cluster, jobs, get_policy("eft"), tables=ClusterTables(cluster, dep))
    simulated = float(res.response_times[50:].mean())
    assert abs(plan.prediction.mean_s / simulated - 1) < 0.15


def test_equilibrium_prefers_the_faster_replica(curves):
    from scalesched.plan.pipeline import model_point

    fast, slow = ReplicaConfig("H100-80G", 2, 1.0), ReplicaConfig("A100-80G", 2, 1.0)
    counts = {fast: 1, slow: 1}
    cap = sum(curves.get("llama-2-70b", c).capacity for c in counts)
    light = model_point(curves, "llama-2-70b", counts, 0.02 * cap)
    heavy = model_point(curves, "llama-2-70b", counts, 0.9 * cap)
    alone = curves.get("llama-2-70b", fast).at_rate(0.02 * cap)
    assert light is not None and heavy is not None and alone is not None
    # at light load everything goes to the faster replica
    assert light.latency_s == pytest.approx(alone.latency_s + alone.wait_s, rel=1e-3)
    assert heavy.latency_s > light.latency_s


def _erlang_c_wait(rho: float, c: int, service_s: float) -> float:
    """Exact M/M/c mean queueing delay (Erlang C), for checking the approximation."""
    a = rho * c
    terms = sum(a**k / math.factorial(k) for k in range(c))
    top = a**c / math.factorial(c) / (1 - rho)
    return top / (terms + top) * service_s / (c * (1 - rho))


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.95])
def test_waits_in_known_queues(rho):
    s = 2.0
    # M/M/1: Sakasegawa's formula is exact, rho / (1 - rho) * S
    assert mmc_wait(rho, 1, s) == pytest.approx(rho / (1 - rho) * s, rel=1e-12)
    # M/D/1 (Pollaczek-Khinchine): half the M/M/1 wait; M/G/1 with scv 1 is M/M/1
    assert mgc_wait(rho, 1, s, 0.0) == pytest.approx(rho / (2 * (1 - rho)) * s, rel=1e-12)
    assert mgc_wait(rho, 1, s, 1.0) == pytest.approx(mmc_wait(rho, 1, s), rel=1e-12)
    # heavier-tailed service waits longer, linearly in (1 + scv)
    assert mgc_wait(rho, 4, s, 3.0) == pytest.approx(2 * mmc_wait(rho, 4, s), rel=1e-12)


@pytest.mark.parametrize("c", [2, 4, 16])
@pytest.mark.parametrize("rho", [0.8, 0.95])
def test_mmc_wait_is_close_to_erlang_c(c, rho):
    """Where waits matter (a loaded replica) the approximation is within 12% of Erlang C;
    at light load with many slots it over-states a wait that is then negligible."""
    exact = _erlang_c_wait(rho, c, 1.0)
    assert mmc_wait(rho, c, 1.0) == pytest.approx(exact, rel=0.12)
    assert mmc_wait(0.5, 16, 1.0) < 0.01  # light load, 16 slots: a hundredth of a service


def test_wait_edges():
    assert mmc_wait(0.0, 8, 1.0) == 0.0 and mgc_wait(0.0, 8, 1.0, 2.0) == 0.0
    assert math.isinf(mmc_wait(1.0, 8, 1.0))
    waits = [mgc_wait(r, 8, 1.0, 1.5) for r in (0.2, 0.5, 0.8, 0.99)]
    assert waits == sorted(waits) and waits[0] > 0


def test_service_scv():
    no_prefill = np.zeros(4)
    # every call alike: no variation
    assert service_scv(no_prefill, np.full(4, 100.0), 0.01) == pytest.approx(0.0, abs=1e-12)
    # outputs 1 and 3 (mean 2, variance 1): scv 1/4, whatever the step
    outs = np.array([1.0, 3.0, 1.0, 3.0])
    assert service_scv(no_prefill, outs, 0.01) == pytest.approx(0.25)
    assert service_scv(no_prefill, outs, 0.05) == pytest.approx(0.25)
    # a constant prefill dilutes the variation
    assert service_scv(np.full(4, 0.02), outs, 0.01) == pytest.approx(0.01**2 / 0.04**2)
