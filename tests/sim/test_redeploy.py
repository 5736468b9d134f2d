"""A planned run moved to another deployment mid-run (``Redeploy``): the simulator loads,
drains and unloads, and resizes exactly the groups of the diff, charges the model's load
time on GPUs held meanwhile, keeps the held-GPU books right, finishes every workflow when
a group comes back while it drains, and refuses a request it cannot carry out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sim_builders import toy_jobs

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision import Place
from scalesched.decision.cycle import drive
from scalesched.decision.features import ENGINE_LOADING, ENGINE_READY, Decision
from scalesched.decision.redeploy import Redeploy
from scalesched.decision.scheduler import BaseScheduler, SchedulingError
from scalesched.policies.eft import EftScheduler
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate, summarise

SPEC = get_cluster("hetero-8")
H0, A0, H1, A1 = 0, 1, 4, 5  # server indices of h100-0, a100-0, h100-1, a100-1


def deployment(*replicas: tuple[str, str, tuple[int, ...], float]) -> Deployment:
    data = {
        "name": "t",
        "replicas": [
            {"model": m, "server": s, "gpus": list(g), "share": share}
            for m, s, g, share in replicas
        ],
    }
    return deployment_from_dict(data, SPEC, "test")


BASE = (
    ("llama-2-7b", "h100-80g-x4-0", (0,), 1.0),
    ("llama-2-70b", "h100-80g-x4-1", (0, 1, 2, 3), 1.0),
)
A = deployment(
    *BASE,
    ("codellama-34b", "a100-80g-x4-0", (0, 1), 1.0),
    ("phi-2", "h100-80g-x4-0", (1,), 1.0),
)
B = deployment(
    *BASE,
    ("codellama-34b", "a100-80g-x4-1", (0, 1), 1.0),
    ("phi-2", "h100-80g-x4-0", (1,), 1.0),
    ("phi-2", "h100-80g-x4-0", (2,), 1.0),
)


TA, TB = ClusterTables(SPEC, A), ClusterTables(SPEC, B)
M34, PHI = MODEL_INDEX["codellama-34b"], MODEL_INDEX["phi-2"]


class MoveAt(BaseScheduler):
    """eft, plus a ``Redeploy`` to each of ``moves`` ((time, tables)) at the first decision
    at or after its time."""

    name = "move-at"

    def __init__(self, *moves: tuple[float, ClusterTables]) -> None:
        self.moves = list(moves)
        self.sent: list[float] = []

    def select(self, decision: Decision) -> int | Place:
        best = EftScheduler().select(decision)
        if self.moves and decision.now >= self.moves[0][0]:
            _, tables = self.moves.pop(0)
            self.sent.append(decision.now)
            return Place(best, loads=(Redeploy(tables),))
        return best


def run_until_sent(sim: Simulation, policy: MoveAt, count: int = 1) -> None:
    """Drive ``sim`` until ``policy`` has sent ``count`` requests."""
    while len(policy.sent) < count:
        decision = sim.next_decision()
        assert decision is not None
        sim.apply(policy.select(decision))


def test_redeploy_carries_out_exactly_the_diff_and_charges_loads():
    jobs = toy_jobs(20)
    policy = MoveAt((0.5, TB))
    sim = Simulation(SPEC, jobs, tables=TA)
    free_before = sim.free_gpus.copy()
    run_until_sent(sim, policy)
    t = policy.sent[0]
    assert sim.tables is TB
    # the new group loads on GPUs it holds from now, for the model's load time
    assert sim.engine_state[A1, M34] == ENGINE_LOADING
    assert sim.engine_ready_at[A1, M34] == pytest.approx(t + TB.load_s[A1, M34])
    assert sim.free_gpus[A1] == free_before[A1] - 2
    # the larger phi-2 group holds its extra GPU while its new replica loads
    assert sim.free_gpus[H0] == free_before[H0] - 1
    assert sim._engines[H0][PHI].tp == 1 and sim._engines[H0][PHI].grow_to >= 0
    drive(sim, policy)
    metrics = summarise(sim, policy="move-at", wall_s=0.0).metrics
    assert metrics["workflows_completed"] == 20
    assert (metrics["redeploys"], metrics["redeploy_loads"]) == (1, 1)
    assert (metrics["redeploy_unloads"], metrics["redeploy_resizes"]) == (1, 1)
    assert metrics["model_loads"] == 1
    assert M34 not in sim._engines[A0] and sim._engines[A1][M34].state == ENGINE_READY
    assert sim._engines[H0][PHI].tp == 2


def test_calls_wait_for_the_load_of_the_group_they_go_to():
    jobs = toy_jobs(20)
    policy = MoveAt((0.5, TB))
    res = simulate(SPEC, jobs, policy, tables=TA, record_trace=True)
    ready = policy.sent[0] + TB.load_s[A1, M34]
    on_new = [r for r in res.trace if r.server == A1 and r.model == "codellama-34b"]
    assert on_new and min(r.start for r in on_new) == pytest.approx(ready)
    assert not any(r.server == A0 and r.model == "codellama-34b" for r in res.trace)


def test_held_gpu_seconds_add_up_on_a_hand_built_move():
    """Before the move the run holds A's GPUs; from it, B's: the group that leaves holds
    no call yet (unloaded at once), the group that arrives holds its GPUs while loading."""
    jobs = toy_jobs(20)
    policy = MoveAt((0.5, TB))
    sim = Simulation(SPEC, jobs, tables=TA)
    drive(sim, policy)
    t, end = policy.sent[0], sim.now
    held_a, held_b = float(TA.tp.sum()), float(TB.tp.sum())
    assert (held_a, held_b) == (8.0, 9.0)
    want = held_a * t + held_b * (end - t)
    assert sim.held_gpu_seconds(0.0, end) == pytest.approx(want)
    assert sim.held_gpu_seconds(0.0, t) == pytest.approx(held_a * t)
    assert sim.held_gpu_seconds(end, end + 10) == pytest.approx(0.0) or sim.done


def test_a_static_planned_run_holds_its_deployment_throughout():
    sim = Simulation(SPEC, toy_jobs(10), tables=TA)
    drive(sim, EftScheduler())
    assert sim.held_gpu_seconds(0.0, sim.now) == pytest.approx(8.0 * sim.now)


def test_a_group_that_comes_back_while_it_drains_keeps_its_calls():
    """A to B while A's 34b group holds calls, then back to A before it drained: the same
    engine serves on, every workflow finishes, and no call is lost."""
    jobs = toy_jobs(40)
    probe = simulate(SPEC, jobs, EftScheduler(), tables=TA, record_trace=True)
    busy = [r.start for r in probe.trace if r.server == A0 and r.model == "codellama-34b"]
    t = float(np.median(busy))
    policy = MoveAt((t, TB), (t + 0.05, TA))
    sim = Simulation(SPEC, jobs, tables=TA)
    engine = sim._engines[A0][M34]
    run_until_sent(sim, policy, 1)
    assert engine.draining and engine.n_requests > 0
    run_until_sent(sim, policy, 2)
    assert sim._engines[A0][M34] is engine and not engine.draining
    drive(sim, policy)
    assert sim.workflows_completed == 40
    assert not np.isnan(sim.response_times).any()


def test_redeploy_refuses_what_it_cannot_carry_out():
    sim = Simulation(SPEC, toy_jobs(3))  # dynamic residency
    decision = sim.next_decision()
    assert decision is not None
    with pytest.raises(SchedulingError, match="planned run"):
        sim.apply(Place(int(np.flatnonzero(decision.mask)[0]), loads=(Redeploy(TB),)))
    from scalesched.runs.world import plan_deployment

    other = get_cluster("hetero-16")
    foreign = ClusterTables(other, plan_deployment(other, "agentic-mix", 2.0))
    sim = Simulation(SPEC, toy_jobs(3), tables=TA)
    decision = sim.next_decision()
    assert decision is not None
    with pytest.raises(SchedulingError, match="own cluster"):
        sim.apply(Place(int(np.flatnonzero(decision.mask)[0]), loads=(Redeploy(foreign),)))
    assert math.isfinite(sim.now)
