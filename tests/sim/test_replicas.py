"""Replicas loaded ahead of demand (``LoadReplica``): they load on free GPUs in the model's
load time, serve later calls, are unloaded after their idle time, never overcommit GPU
memory, and leave runs that do not ask for them unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from test_invariants import assert_each_task_once_after_its_parents, scenarios

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import MODEL_NAMES, ClusterTables
from scalesched.decision import LoadReplica, Place
from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY, Decision
from scalesched.decision.scheduler import BaseScheduler, SchedulingError
from scalesched.policies.eft import EftScheduler
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate, summarise
from scalesched.workload.instance import Job

SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=30, rate=0.8, seed=3))


class Replicator(BaseScheduler):
    """eft, plus at every LLM call a replica of its model on a random feasible server with
    the engine absent (free GPUs or not: the simulator decides), seeded."""

    name = "replicator"

    def __init__(self, idle_s: float = 5.0) -> None:
        self.idle_s = idle_s
        self.rng = np.random.default_rng(0)

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def select(self, decision: Decision) -> int | Place:
        best = EftScheduler().select(decision)
        if decision.task.kind != "llm":
            return best
        m = decision.task.model
        where = np.flatnonzero(decision.mask & (decision.view.engine_state[:, m] == ENGINE_ABSENT))
        if where.size == 0:
            return best
        target = int(self.rng.choice(where))
        return Place(best, loads=(LoadReplica(MODEL_NAMES[m], target, self.idle_s),))


def first_llm(sim: Simulation) -> Decision:
    decision = sim.next_decision()
    while decision is not None and decision.task.kind != "llm":
        sim.apply(int(np.flatnonzero(decision.mask)[0]))
        decision = sim.next_decision()
    assert decision is not None
    return decision


def free_target(sim: Simulation, decision: Decision, best: int) -> int:
    """A server other than ``best`` where the call's model is absent and fits free GPUs."""
    m = decision.task.model
    ok = decision.mask & (sim.engine_state[:, m] == ENGINE_ABSENT)
    ok &= sim.free_gpus >= TABLES.tp[:, m]
    ok[best] = False
    assert ok.any()
    return int(np.flatnonzero(ok)[-1])


def test_a_replica_loads_then_serves_a_later_call() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES, record_trace=True)
    decision = first_llm(sim)
    m = decision.task.model
    best = EftScheduler().select(decision)
    target = free_target(sim, decision, best)
    load_s = float(TABLES.load_s[target, m])
    loads_before = sim.model_loads
    t0 = sim.now
    sim.apply(Place(best, loads=(LoadReplica(MODEL_NAMES[m], target, math.inf),)))
    assert sim.engine_state[target, m] == ENGINE_LOADING
    assert sim.engine_ready_at[target, m] == pytest.approx(t0 + load_s)
    assert sim._replicas.loads == 1 and sim.model_loads > loads_before
    # Send the next call of that model to the replica: it finds the engine loading or
    # ready (no load of its own), and that engine is the replica.
    decision = sim.next_decision()
    while decision is not None and not (
        decision.task.kind == "llm" and decision.task.model == m and decision.mask[target]
    ):
        sim.apply(EftScheduler().select(decision))
        decision = sim.next_decision()
    assert decision is not None
    assert sim.engine_state[target, m] in (ENGINE_LOADING, ENGINE_READY)
    loads = sim.model_loads
    sim.apply(target)
    engine = sim._engines[target][m]
    assert engine.replica_at == t0 and sim.model_loads == loads
    while (decision := sim.next_decision()) is not None:
        sim.apply(EftScheduler().select(decision))
    served = [r for r in sim.trace if r.server == target and r.model == MODEL_NAMES[m]]
    assert served and min(r.start for r in served) >= t0 + load_s - 1e-9
    record = sim.run_record(policy="x", cluster="c", makespan_s=1.0, utilisation=(0, 0), wall_s=0)
    assert record.replicas is not None and record.replicas[:3] == (1, 1, 0)  # never released
    assert record.replicas[3] >= 1  # the call sent there, at least


def test_an_unused_replica_is_released_after_its_idle_time() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES, record_trace=True)
    decision = first_llm(sim)
    m = decision.task.model
    best = EftScheduler().select(decision)
    target = free_target(sim, decision, best)
    t0, idle_s = sim.now, 7.0
    tp, load_s = float(TABLES.tp[target, m]), float(TABLES.load_s[target, m])
    sim.apply(Place(best, loads=(LoadReplica(MODEL_NAMES[m], target, idle_s),)))
    released_at = t0 + load_s + idle_s
    free_while_held = None
    while (decision := sim.next_decision()) is not None:
        if sim.now < released_at:
            free_while_held = sim.free_gpus[target]
        elif free_while_held is not None and sim.engine_state[target, m] == ENGINE_ABSENT:
            assert sim.free_gpus[target] == free_while_held + tp  # the GPUs are back
            free_while_held = None
        mask = decision.mask.copy()
        mask[target] = False  # nothing ever uses the replica
        sim.apply(int(np.argmin(np.where(mask, decision.finish_s, np.inf))))
    assert sim.now > released_at  # the run outlived the replica
    result = summarise(sim, policy="x", wall_s=0.0)
    metrics = result.metrics
    assert metrics["replica_requests"] == metrics["replica_loads"] == 1
    assert metrics["replica_releases"] == 1 and metrics["replica_calls"] == 0
    assert metrics["replica_gpu_seconds"] == pytest.approx(tp * (load_s + idle_s))
    assert all(r.server != target for r in sim.trace if r.model == MODEL_NAMES[m])


def test_release_timers_do_not_outlive_the_run() -> None:
    """A replica whose idle time runs past the last completion does not stretch the run:
    the clock stops at the last task's end."""
    sim = Simulation(SPEC, JOBS[:3], tables=TABLES, record_trace=True)
    policy = Replicator(idle_s=1e6)
    while (decision := sim.next_decision()) is not None:
        sim.apply(policy.select(decision))
    assert sim._replicas.loads > 0 and sim._replicas.released == 0
    assert sim.now == max(r.end for r in sim.trace)


def test_a_replica_request_that_does_not_fit_does_nothing() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = first_llm(sim)
    m = decision.task.model
    best = EftScheduler().select(decision)
    taken = free_target(sim, decision, best)
    sim._free_gpus[taken] = sim.free_gpus[taken] = 0.0  # as if other engines held them
    sim.apply(Place(best, loads=(LoadReplica(MODEL_NAMES[m], taken),)))
    assert sim.engine_state[taken, m] == ENGINE_ABSENT
    assert sim._replicas.requests == 1 and sim._replicas.loads == 0


@pytest.mark.parametrize(
    "load", [LoadReplica("no-such-model", 0), LoadReplica("llama-2-7b", 99)], ids=str
)
def test_a_bad_replica_request_is_a_contract_error(load: LoadReplica) -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = first_llm(sim)
    with pytest.raises(SchedulingError, match="replica"):
        sim.apply(Place(EftScheduler().select(decision), loads=(load,)))


def test_cpu_servers_cannot_hold_a_replica() -> None:
    cpu = int(np.flatnonzero(TABLES.gpus == 0)[0])
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = first_llm(sim)
    with pytest.raises(SchedulingError, match="does not fit"):
        sim.apply(Place(EftScheduler().select(decision), loads=(LoadReplica("phi-2", cpu),)))


def test_same_seed_same_numbers_with_replicas() -> None:
    a = simulate(SPEC, JOBS, Replicator(), seed=5, tables=TABLES).metrics
    b = simulate(SPEC, JOBS, Replicator(), seed=5, tables=TABLES).metrics
    a.pop("sim_wall_time_s"), b.pop("sim_wall_time_s")
    assert a == b
    assert int(a["replica_loads"]) > 0 and int(a["replica_releases"]) > 0


def test_runs_without_replicas_report_no_replica_metrics() -> None:
    m = simulate(SPEC, JOBS, EftScheduler(), seed=5, tables=TABLES).metrics
    assert not [k for k in m if k.startswith("replica_")]


def check_gpus(sim: Simulation) -> None:
    """Every server's GPUs: free + held by engines (loading or ready) = its GPUs, free >= 0."""
    for s in range(sim.tables.n):
        waiting = {id(e) for e in sim._gpu_wait[s]}
        held = sum(e.tp for e in sim._engines[s].values() if id(e) not in waiting)
        assert sim._free_gpus[s] >= 0
        assert sim._free_gpus[s] + held == pytest.approx(float(sim.tables.gpus[s]))
        assert sim.free_gpus[s] == sim._free_gpus[s]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_replicas_never_overcommit_gpus(case: tuple[ClusterSpec, list[Job], str, int]) -> None:
    cluster, jobs, _, seed = case
    sim = Simulation(cluster, jobs, record_trace=True)
    policy = Replicator(idle_s=[0.5, 5.0, math.inf][seed % 3])
    policy.reset(seed)
    decision = sim.next_decision()
    while decision is not None:
        check_gpus(sim)
        sim.apply(policy.select(decision))
        check_gpus(sim)
        decision = sim.next_decision()
    check_gpus(sim)
    assert sim.workflows_completed == len(jobs)
    assert_each_task_once_after_its_parents(sim, jobs)
    # No release timer or replica load outlives the work (evicted replicas' timers too).
    assert sim.now == max(r.end for r in sim.trace)
