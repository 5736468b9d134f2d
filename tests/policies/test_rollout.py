"""rollout_oracle and rollout: forks per candidate, keep the cheapest future (the true one,
or sampled ones), fall back to the base."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Place
from scalesched.decision.cycle import drive
from scalesched.decision.features import ENGINE_ABSENT, Decision, make_decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.policies import get_policy
from scalesched.policies.eft import eft_choice
from scalesched.policies.rollout import BASES, RolloutScheduler, SampledRolloutScheduler
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs
from scalesched.workload.instance import TaskInstance

SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=12, rate=1.2, seed=5))


def _small(**kw: Any) -> RolloutScheduler:
    return RolloutScheduler(horizon_s=kw.pop("horizon_s", 2.0), min_model_gb=0.0, **kw)


def _metrics(policy: RolloutScheduler, seed: int) -> dict[str, Any]:
    m = simulate(SPEC, JOBS, policy, seed=seed, tables=TABLES).metrics
    m.pop("sim_wall_time_s")
    return m


def test_same_seed_same_answers_and_it_does_roll_out() -> None:
    a, b = _small(), _small()
    assert _metrics(a, 3) == _metrics(b, 3)
    assert a.stats["rolled"] > 10 and a.stats == {**b.stats, "fork_s": a.stats["fork_s"]}


def test_answers_are_always_feasible_and_contenders_come_from_the_mask() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = _small(candidates=4)
    policy.reset(0)
    seen = 0
    decision = sim.next_decision()
    while decision is not None:
        choice = policy.inner.select(decision)
        assert isinstance(choice, int)
        servers = policy.contenders(decision, choice)
        assert all(decision.mask[s] for s in servers) and len(set(servers)) == len(servers)
        answer = policy.select(decision)
        assert isinstance(answer, int) and decision.mask[answer]
        seen += len(servers) > 1 and not decision.mask.all()
        sim.apply(answer)
        decision = sim.next_decision()
    assert seen > 0, "some contested decision must have had masked servers"


def test_without_loads_only_the_bases_choice_may_start_a_model_load() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    free, held = _small(candidates=8), _small(candidates=8, loads=False)
    free.reset(0)
    held.reset(0)
    dropped = 0
    decision = sim.next_decision()
    while decision is not None:
        choice = free.inner.select(decision)
        assert isinstance(choice, int)
        if decision.task.kind == "llm":
            absent = decision.view.engine_state[:, decision.task.model] == ENGINE_ABSENT
            tried = held.contenders(decision, choice)
            assert not any(absent[s] for s in tried[1:])
            dropped += len(free.contenders(decision, choice)) - len(tried)
        sim.apply(choice)
        decision = sim.next_decision()
    assert dropped > 0, "some decision must have had a server that would start a load"


class _NoFork:
    """A simulation seen through a view without ``fork`` (as the Ray runtime's is)."""

    def __init__(self, sim: Simulation) -> None:
        self._sim = sim

    def __getattr__(self, name: str) -> Any:
        if name == "fork":
            raise AttributeError(name)
        return getattr(self._sim, name)


def test_without_fork_it_answers_as_its_base_and_says_so_once() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy, tail = _small(), get_policy("tail")
    decisions: list[Decision] = []
    decision = sim.next_decision()
    while decision is not None and len(decisions) < 40:
        decisions.append(make_decision(TABLES, _NoFork(sim), decision.task))  # type: ignore[arg-type]
        sim.apply(tail.select(decision))
        decision = sim.next_decision()
    with pytest.warns(UserWarning, match="cannot fork") as caught:
        answers = [policy.select(d) for d in decisions]
    assert len(caught) == 1
    assert answers == [tail.select(d) for d in decisions]
    assert policy.stats["rolled"] == 0


class _SlowestFirst(BaseScheduler):
    """A base that ranks servers backwards: the slowest estimated finish first."""

    name = "slowest_first"

    def scores(self, decision: Decision) -> np.ndarray:
        finish = decision.finish_s + decision.imposed_s
        return np.where(decision.mask & np.isfinite(finish), -finish, np.inf)

    def select(self, decision: Decision) -> int:
        return int(np.argmin(self.scores(decision)))


def test_it_overrules_a_base_whose_choice_is_clearly_worse_in_the_future() -> None:
    """One workflow alone on the cluster: the base puts its first contested LLM call on the
    slowest server; the fork on eft's (fastest) server finishes it much earlier."""
    jobs = build_jobs(TABLES, Scenario(workflows=1, rate=1.0, seed=2))
    sim = Simulation(SPEC, jobs, tables=TABLES)
    policy = RolloutScheduler(
        base_policy=_SlowestFirst(), candidates=8, horizon_s=1e4, min_model_gb=0.0
    )
    decision = sim.next_decision()
    while decision is not None:
        finish = np.where(decision.mask, decision.finish_s, np.inf)
        spread = np.ptp(finish[np.isfinite(finish)]) if np.isfinite(finish).sum() > 1 else 0
        if decision.task.kind == "llm" and spread > 1.0:
            break
        sim.apply(policy.inner.select(decision))
        decision = sim.next_decision()
    assert decision is not None, "the workflow must have a contested LLM call"
    base_choice, fastest = policy.inner.select(decision), eft_choice(decision)
    assert isinstance(base_choice, int)
    assert base_choice != fastest
    end = sim.now + 1e4
    slow_cost = policy.trial(sim.fork, base_choice, end)[0]
    fast_cost = policy.trial(sim.fork, fastest, end)[0]
    assert fast_cost < slow_cost - 1.0, "the constructed case must separate the two"
    answer = policy.select(decision)
    assert isinstance(answer, int) and answer != base_choice and policy.stats["changed"] == 1
    assert policy.trial(sim.fork, answer, end)[0] <= fast_cost + 1e-9


@pytest.mark.parametrize("base", sorted(BASES))
def test_a_large_min_gain_keeps_the_base_choice(base: str) -> None:
    a, b = _small(min_gain_s=1e9, base=base), get_policy(base)
    ma = _metrics(a, 1)
    mb = simulate(SPEC, JOBS, b, seed=1, tables=TABLES).metrics
    mb.pop("sim_wall_time_s")
    assert a.stats["rolled"] > 0 and a.stats["changed"] == 0
    assert ma == {**mb, "policy": "rollout_oracle"}


@pytest.mark.parametrize("base", ["soft_eft", "p2c", "tail", "plas"])
def test_the_fork_of_the_base_choice_is_the_run_under_the_base(base: str) -> None:
    """What the trial of the base's own answer costs is what the run then accrues under
    the base (its random generator copied after the answer, so seeded bases too)."""
    policy = _small(base=base, horizon_s=5.0)
    policy.reset(2)
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = sim.next_decision()
    for _ in range(15):  # into the run, where servers are busy
        assert decision is not None
        sim.apply(policy.inner.select(decision))
        decision = sim.next_decision()
    assert decision is not None
    choice = policy.inner.select(decision)
    server, priority = (
        (choice.server, choice.priority) if isinstance(choice, Place) else (choice, None)
    )
    assert isinstance(server, int) and (priority is None) == (base != "plas")
    end = sim.now + 5.0
    area, stop, _, _ = policy.trial(sim.fork, server, end, priority)
    area0 = sim.in_system_area
    sim.apply(choice)
    drive(sim, policy.inner, until=lambda: sim.now >= end)
    assert (area, stop) == (sim.in_system_area - area0, sim.now)


def test_over_an_ordering_base_every_answer_keeps_its_priority() -> None:
    """Over ``plas`` the lookahead picks among tail's servers and each answer carries the
    priority plas gave the task, on whichever server wins."""
    policy = _small(base="plas")
    policy.reset(1)
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision, moved = sim.next_decision(), 0
    while decision is not None:
        answer = policy.select(decision)
        assert isinstance(answer, Place)
        assert answer.priority == decision.task.attained_s and decision.mask[answer.server]
        moved += int(answer.server != int(np.argmin(policy.inner.scores(decision))))
        sim.apply(answer)
        decision = sim.next_decision()
    assert sim.done and policy.stats["rolled"] > 0 and moved == policy.stats["changed"] > 0


def test_bad_options_are_refused() -> None:
    for kw in (
        dict(candidates=1),
        dict(horizon_s=0.0),
        dict(max_decision_s=0.0),
        dict(base="nope"),
        dict(min_gain_s=-1.0),
    ):
        with pytest.raises(ValueError):
            RolloutScheduler(**kw)  # type: ignore[arg-type]


def test_a_wall_cap_answers_the_base() -> None:
    policy = _small(max_decision_s=1e-9)
    _metrics(policy, 0)
    assert policy.stats["capped"] > 0 and policy.stats["changed"] == 0


def test_registered() -> None:
    assert isinstance(get_policy("rollout_oracle"), RolloutScheduler)
    rollout = get_policy("rollout")
    assert isinstance(rollout, SampledRolloutScheduler) and rollout.name == "rollout"
    assert (rollout.candidates, rollout.horizon_s, rollout.forks) == (3, 20.0, 1)
    assert rollout.max_decision_s is None


class _Truth:
    """A sampler that answers the realised values: rollout with it is rollout_oracle."""

    def redraw_task(self, task: TaskInstance, pattern: str, level: float) -> TaskInstance:
        return task

    def arrivals(
        self, seen: np.ndarray, now: float, n: int, rng: np.random.Generator
    ) -> np.ndarray:
        return np.array([j.arrival for j in JOBS[seen.size :]])


def _sampled(**kw: Any) -> SampledRolloutScheduler:
    return SampledRolloutScheduler(horizon_s=kw.pop("horizon_s", 2.0), min_model_gb=0.0, **kw)


def test_sampled_rollout_with_the_truth_is_the_oracle() -> None:
    oracle, truthful = _small(), _sampled(sampler=_Truth())
    m_oracle, m_truthful = _metrics(oracle, 3), _metrics(truthful, 3)
    assert m_truthful == {**m_oracle, "policy": "rollout"}
    assert truthful.stats["rolled"] == oracle.stats["rolled"] > 10


def test_sampled_rollout_is_seeded_and_differs_from_the_oracle() -> None:
    a, b, c = _sampled(forks=2), _sampled(forks=2), _sampled(forks=2)
    ma, mb, mc = _metrics(a, 3), _metrics(b, 3), _metrics(c, 4)
    assert ma == mb and a.stats == {**b.stats, "fork_s": a.stats["fork_s"]}
    assert a.stats["rolled"] > 10
    assert ma != mc  # the seed reaches the draws
    assert ma != {**_metrics(_small(), 3), "policy": "rollout"}


def test_every_candidate_meets_the_same_sampled_futures() -> None:
    """Common random numbers: within a decision, each candidate's k-th fork draws from the
    same generator state; the k futures differ, and so do the next decision's."""
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = _sampled(forks=3)
    policy.reset(9)
    decision = sim.next_decision()
    assert decision is not None
    makers = policy.futures(sim.fork)
    keys = [[m()._futures.key for m in makers] for _ in range(2)]
    assert keys[0] == keys[1] and len(set(keys[0])) == 3
    assert {m()._futures.key for m in policy.futures(sim.fork)}.isdisjoint(keys[0])


def test_bad_forks_are_refused() -> None:
    with pytest.raises(ValueError, match="forks"):
        SampledRolloutScheduler(forks=0)


@pytest.mark.parametrize("core", ["python", "compiled"])
def test_at_time_zero_with_no_rate_to_sample_it_answers_its_base(core: str) -> None:
    """A run whose first jobs arrive at 0: no time has passed to estimate an arrival rate
    from, so those decisions answer as the base (counted); later ones roll out."""
    at_zero = [dataclasses.replace(j, arrival=0.0) for j in JOBS[:3]] + JOBS[3:]
    policy = _sampled()
    sim = Simulation(SPEC, at_zero, tables=TABLES, core=core)
    drive(sim, policy)
    assert policy.stats["no_future"] > 0 and policy.stats["rolled"] > 10
    assert all(t == t for t in sim.ended_at)  # every task ran
