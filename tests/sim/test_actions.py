"""The contract's richer actions in the simulator: hedged copies, deferral, batch decisions.

Invariants over random workflows and clusters (hypothesis): a task's result is produced
once, cancelled copies give back everything they held, deferred tasks always run, and every
workflow completes.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants import assert_each_task_once_after_its_parents, scenarios

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision import Defer, Hedge, Place
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate, summarise
from scalesched.workload.instance import Job


class HedgeTwo(BaseScheduler):
    """Hedge every LLM call on its two best servers by estimated finish (the docs' example)."""

    name = "hedge-two"

    def select(self, decision: Decision) -> int | Hedge:
        finish = np.where(decision.mask, decision.finish_s, np.inf)
        best = np.argsort(finish)[:2]
        if decision.task.kind == "llm" and np.isfinite(finish[best]).all() and len(best) == 2:
            return Hedge((int(best[0]), int(best[1])))
        return int(best[0])


class Procrastinator(BaseScheduler):
    """Defers whenever it may, hedges tools on two servers when it must act."""

    name = "procrastinator"

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def select(self, decision: Decision) -> int | Defer | Hedge | Place:
        if decision.can_defer and self.rng.random() < 0.7:
            return Defer()
        feasible = np.flatnonzero(decision.mask)
        if decision.task.kind == "tool" and feasible.size >= 2:
            pick = self.rng.choice(feasible, size=2, replace=False)
            return Hedge((int(pick[0]), int(pick[1])))
        return Place(int(self.rng.choice(feasible)))


class JointEft(BaseScheduler):
    """A batch scheduler: eft for every waiting task, each on the state of the instant."""

    name = "joint-eft"

    def select(self, decision: Decision) -> int:
        return int(np.argmin(np.where(decision.mask, decision.finish_s, np.inf)))

    def select_batch(self, decisions: list[Decision]) -> list[int]:
        return [self.select(d) for d in decisions]


def assert_all_released(sim: Simulation) -> None:
    """After a run nothing is held: no request, core, KV token or placed-work count."""
    assert np.allclose(sim.n_assigned, 0)
    assert np.allclose(sim.busy_cores, 0) and np.allclose(sim.tools_in_flight, 0)
    assert np.allclose(sim.engine_batch, 0) and np.allclose(sim.engine_ctx, 0, atol=1e-6)
    assert np.allclose(sim.cpu_backlog, 0, atol=1e-9)
    for engines in sim._engines:
        for eng in engines.values():
            assert eng.n_active == eng.n_decoding == eng.kv_used == 0
            assert not eng.waiting and not eng.marks
    assert all(not q for q in sim._cpu_queue)


def run_policy(cluster: ClusterSpec, jobs: list[Job], policy: BaseScheduler) -> Simulation:
    sim = Simulation(cluster, jobs, record_trace=True)
    if hasattr(policy, "select_batch"):
        batch = sim.next_decisions()
        while batch:
            sim.apply_batch(policy.select_batch(batch))  # type: ignore[attr-defined]
            batch = sim.next_decisions()
        return sim
    d = sim.next_decision()
    while d is not None:
        sim.apply(policy.select(d))
        d = sim.next_decision()
    return sim


def check_run(sim: Simulation, jobs: list[Job]) -> None:
    total = sum(len(j.workflow.tasks) for j in jobs)
    result = summarise(sim, policy="x", wall_s=0.0)
    assert result.metrics["workflows_completed"] == len(jobs)
    assert sim.tasks_completed == total
    assert_each_task_once_after_its_parents(sim, jobs)  # each result produced once
    assert result.metrics["extra_server_seconds"] >= 0
    assert_all_released(sim)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.integers(0, 2**16))
def test_hedges_and_deferrals_keep_every_invariant(
    case: tuple[ClusterSpec, list[Job], str, int], seed: int
) -> None:
    cluster, jobs, _, _ = case
    for policy in (HedgeTwo(), Procrastinator(np.random.default_rng(seed)), JointEft()):
        check_run(run_policy(cluster, jobs, policy), jobs)


SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=60, rate=1.0, seed=2))


def test_hedging_charges_extra_server_time_and_reports_it() -> None:
    m = simulate(SPEC, JOBS, HedgeTwo(), tables=TABLES).metrics
    assert m["hedged_tasks"] > 0 and m["extra_server_seconds"] > 0
    plain = simulate(SPEC, JOBS, get_policy("eft"), tables=TABLES).metrics
    assert plain["hedged_tasks"] == 0 and plain["extra_server_seconds"] == 0


def test_a_scheduler_that_always_defers_still_finishes() -> None:
    class AlwaysDefer(BaseScheduler):
        name = "always-defer"

        def select(self, decision: Decision) -> int | Defer:
            if decision.can_defer:
                return Defer()
            return int(np.argmax(decision.mask))

    sim = run_policy(SPEC, JOBS[:10], AlwaysDefer())
    check_run(sim, JOBS[:10])
    assert sim.deferrals > 0


def test_batch_decisions_cover_every_waiting_task() -> None:
    m = simulate(SPEC, JOBS, JointEft(), tables=TABLES).metrics
    assert m["workflows_completed"] == len(JOBS)


def test_an_engine_idle_when_its_load_ends_serves_the_gpu_queue() -> None:
    """A hedged copy cancelled while its engine was still loading leaves that engine idle
    at load end: engines waiting for the server's GPUs must get them (else a run ends with
    a workflow stuck)."""
    from sim_builders import llm, workflow

    from scalesched.cluster.model import ClusterSpec, ServerSpec
    from scalesched.decision.actions import Hedge
    from scalesched.sim.engine import Simulation
    from scalesched.workload.instance import Job

    gpu = ("custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0)
    spec = ClusterSpec("two", (ServerSpec("g0", *gpu), ServerSpec("g1", *gpu)))
    jobs = [
        Job(0, 0.0, workflow([llm("warm", prompt=16, out=1)], {})),
        Job(1, 30.0, workflow([llm("x", prompt=16, out=1)], {})),
        Job(2, 30.1, workflow([llm("y", model="phi-2", prompt=16, out=1)], {})),
    ]
    sim = Simulation(spec, jobs)
    answers = iter([0, Hedge((0, 1)), 1])  # warm 7b on g0; x on both; y on g1 while it loads
    while sim.next_decision() is not None:
        sim.apply(next(answers))
    assert sim.done
