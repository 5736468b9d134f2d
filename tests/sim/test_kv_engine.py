"""KV state across calls in the simulator (``--kv-policy``): prefill skips cached prefixes,
sessions keep their KV across tool pauses, memory accounting stays exact, and with the
cache off nothing changes."""

from __future__ import annotations

import dataclasses

import pytest
from sim_builders import llm, tool, toy_jobs, workflow

from scalesched.cache.kv import KV_POLICIES, cached_prefill
from scalesched.cluster import engine_perf, get_cluster
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.run import _drive, simulate
from scalesched.sim.scenario import Scenario, build_jobs
from scalesched.workload.instance import Job

APP = 1024


def _one_gpu() -> ClusterSpec:
    return ClusterSpec("one", (ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0),))


def _session_job(pause: float) -> Job:
    """turn a -> tool (pause) -> turn b extending a's context, on one 7b engine."""
    a = dataclasses.replace(llm("a", prompt=APP + 300, out=100), prefix_id="app", prefix_tokens=APP)
    b = dataclasses.replace(
        llm("b", prompt=APP + 300 + 100 + 200, out=50),
        prefix_id="app",
        prefix_tokens=APP,
        context_of=0,
    )
    return Job(0, 0.0, workflow([a, tool("t", cpu=0.0, ext=pause), b], {(0, 1): 0, (1, 2): 0}))


def _run(jobs: list[Job], cluster: ClusterSpec, kv: str | None, policy: str = "eft") -> Simulation:
    sim = Simulation(cluster, jobs, kv_policy=kv)
    _drive(sim, get_policy(policy), 0, 0.0)
    return sim


@pytest.mark.parametrize("kv", KV_POLICIES)
def test_second_turn_prefills_only_its_new_tokens(kv: str) -> None:
    sim = _run([_session_job(pause=2.0)], _one_gpu(), kv)
    eng = engine_perf("llama-2-7b", "A100-80G", 1)
    b_prompt = APP + 600
    hit = cached_prefill(b_prompt, APP + 300 + 100)
    assert hit == 1424 // 16 * 16
    record = sim.run_record(
        policy="eft", cluster="one", makespan_s=1.0, utilisation=(sim.tables.zeros,) * 2, wall_s=0
    ).kv
    assert record is not None
    assert list(record.cached_tokens) == [0, hit]
    assert record.ttft_s[1] == pytest.approx(eng.prefill_s(b_prompt - hit), rel=1e-12)
    # Turn a waits for the model to load, then computes its whole prompt (nothing cached).
    assert record.ttft_s[0] == pytest.approx(eng.load_s(8.0) + eng.prefill_s(APP + 300), rel=1e-9)
    assert list(record.reentry_miss) == [False]


def test_without_cache_the_second_turn_prefills_everything() -> None:
    job = _session_job(pause=2.0)
    cached = simulate(_one_gpu(), [job], get_policy("eft"), kv_policy="lru")
    plain = simulate(_one_gpu(), [job], get_policy("eft"))
    eng = engine_perf("llama-2-7b", "A100-80G", 1)
    saved = eng.prefill_s(APP + 600) - eng.prefill_s(APP + 600 - cached_prefill(APP + 600, 1424))
    assert plain.response_times[0] - cached.response_times[0] == pytest.approx(saved, rel=1e-9)
    assert cached.metrics["prefix_hit_rate"] > 0.4
    assert "prefix_hit_rate" not in plain.metrics


@pytest.mark.parametrize("kv", KV_POLICIES)
def test_memory_accounting_balances_under_pressure(kv: str) -> None:
    cluster = get_cluster("hetero-8")
    tables = ClusterTables(cluster)
    jobs = build_jobs(tables, Scenario(workload="agent-mix", workflows=60, rate=1.5, seed=2))
    # the Python engine's engines, read after the run (a compiled run keeps its engines in
    # C++; it gives the same runs and KV records: tests/sim/test_compiled_run.py)
    sim = Simulation(cluster, jobs, kv_policy=kv, core="python")
    _drive(sim, get_policy("eft"), 0, 0.0)
    assert sim.workflows_completed == 60
    evicted = 0
    for engines in sim._engines:
        for e in engines.values():
            assert e.kv is not None
            assert e.n_active == 0 and e.kv.held == 0
            assert e.kv_used == e.kv.resident  # nothing reserved is left behind
            assert e.kv.resident == sum(s.tokens for s in e.kv.segments.values())
            evicted += e.kv.evicted
    assert not sim._kv.held  # type: ignore[union-attr]
    assert evicted > 0  # the run did evict: the test exercised eviction


def test_cache_off_is_the_memoryless_engine() -> None:
    cluster = get_cluster("hetero-8")
    a = simulate(cluster, toy_jobs(30), get_policy("eft"), warmup=5)
    b = simulate(cluster, toy_jobs(30), get_policy("eft"), warmup=5, kv_policy=None)
    assert a.metrics.keys() == b.metrics.keys()
    assert {k: v for k, v in a.metrics.items() if k != "sim_wall_time_s"} == {
        k: v for k, v in b.metrics.items() if k != "sim_wall_time_s"
    }
    assert "ttft_mean_s" not in a.metrics


def test_calls_without_prefix_identity_run_as_before_under_a_policy() -> None:
    """An existing workload under --kv-policy: nothing to reuse, same response times."""
    cluster = get_cluster("hetero-8")
    a = simulate(cluster, toy_jobs(30), get_policy("eft"), warmup=5)
    b = simulate(cluster, toy_jobs(30), get_policy("eft"), warmup=5, kv_policy="lru")
    assert (a.response_times == b.response_times).all()
    assert b.metrics["prefix_hit_rate"] == 0.0 and b.metrics["evicted_tokens"] == 0


def test_nocache_measures_the_memoryless_engine() -> None:
    """nocache runs the cache path with nothing reused: the response times of the cache off,
    every re-entry a miss."""
    cluster = get_cluster("hetero-8")
    tables = ClusterTables(cluster)
    jobs = build_jobs(tables, Scenario(workload="agent-mix", workflows=40, rate=1.0, seed=4))
    off = simulate(cluster, jobs, get_policy("eft"), warmup=5)
    measured = simulate(cluster, jobs, get_policy("eft"), warmup=5, kv_policy="nocache")
    assert (off.response_times == measured.response_times).all()
    m = measured.metrics
    assert m["prefix_hit_rate"] == 0.0 and m["evicted_tokens"] == 0
    assert m["reentry_miss_rate"] == 1.0 and float(m["ttft_mean_s"]) > 0


def test_streamed_and_up_front_runs_agree_with_a_cache() -> None:
    from scalesched.sim.scenario import stream_jobs

    cluster = get_cluster("hetero-8")
    tables = ClusterTables(cluster)
    scenario = Scenario(workload="agent-mix", workflows=40, rate=1.0, seed=5)
    a = simulate(cluster, build_jobs(tables, scenario), get_policy("eft"), kv_policy="ttl")
    b = simulate(cluster, stream_jobs(tables, scenario), get_policy("eft"), kv_policy="ttl")
    drop = {"sim_wall_time_s"}
    assert {k: v for k, v in a.metrics.items() if k not in drop} == {
        k: v for k, v in b.metrics.items() if k not in drop
    }


def test_hedged_copies_give_back_what_they_hold() -> None:
    """Cancelled hedge copies release their reservation and the segments they held."""
    cluster = get_cluster("hetero-8")
    tables = ClusterTables(cluster)
    jobs = build_jobs(tables, Scenario(workload="agent-mix", workflows=40, rate=1.5, seed=2))
    sim = _run(jobs, cluster, "lru", policy="hedge")
    assert sim.workflows_completed == 40 and sim.hedged_tasks > 0
    for engines in sim._engines:
        for e in engines.values():
            assert e.kv is not None
            assert e.n_active == 0 and e.kv.held == 0 and e.kv_used == e.kv.resident
    assert not sim._kv.held  # type: ignore[union-attr]


def test_policy_terms_read_the_visible_session() -> None:
    """TTL protects a call for its tool's predicted time; agent-aware credits a call whose
    session continues by the tasks waiting on it, and a session's last call not at all."""
    a = dataclasses.replace(llm("a", prompt=APP + 300, out=100), prefix_id="app", prefix_tokens=APP)
    b = dataclasses.replace(
        llm("b", prompt=APP + 600, out=50), prefix_id="app", prefix_tokens=APP, context_of=0
    )
    c = dataclasses.replace(
        llm("c", prompt=APP + 700, out=50), prefix_id="app", prefix_tokens=APP, context_of=2
    )
    tasks = [a, tool("t1", cpu=0.0, ext=2.0), b, tool("t2", cpu=0.0, ext=4.0), c]
    job = Job(0, 0.0, workflow(tasks, {(0, 1): 0, (1, 2): 0, (2, 3): 0, (3, 4): 0}))
    sim = Simulation(_one_gpu(), [job], kv_policy="agent-aware")
    kv = sim._kv
    assert kv is not None
    assert kv.terms("ttl", 0, a) == (1.5 * 2.0 + 0.5, 0.0)
    assert kv.terms("agent-aware", 0, a) == (float("-inf"), 4.0)  # t1, b, t2, c wait
    assert kv.terms("agent-aware", 2, b) == (float("-inf"), 2.0)
    assert kv.terms("agent-aware", 4, c) == (float("-inf"), 0.0)  # the session ends
    assert kv.terms("ttl", 4, c)[0] == float("-inf")
