"""hedge: tail's placement plus Monte-Carlo hedges that run for real, within the budget."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Hedge
from scalesched.policies import get_policy
from scalesched.policies.hedge import Candidates, HedgeScheduler
from scalesched.predict.features import token_baseline, token_inputs
from scalesched.predict.metrics import predicted_mean
from scalesched.predict.model import QUANTILES
from scalesched.predict.sampling import sample_quantiles, stratified_levels
from scalesched.sim.engine import Simulation
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs

SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=40, rate=0.8, seed=5))


def test_sampling_reads_the_quantile_function() -> None:
    q = np.array([[1.0, 2.0, 3.0, 5.0, 8.0, 9.0, 12.0, 15.0, 30.0]])
    assert np.allclose(sample_quantiles(q, np.array(QUANTILES))[0], q[0])
    levels = stratified_levels(np.random.default_rng(1), 4000)
    assert np.all(np.diff(np.sort(levels) * 4000 // 1) == 1)  # one per slice
    draws = sample_quantiles(q, levels)[0]
    assert draws.min() >= 1.0 - 1e-9 and draws.max() <= 30.0 + 1e-9
    assert abs(draws.mean() - predicted_mean(q)[0]) < 0.02 * predicted_mean(q)[0]


def test_without_budget_it_is_tail() -> None:
    a = simulate(SPEC, JOBS, HedgeScheduler(budget=0.0), seed=2, tables=TABLES).metrics
    b = simulate(SPEC, JOBS, get_policy("tail"), seed=2, tables=TABLES).metrics
    a.pop("sim_wall_time_s"), b.pop("sim_wall_time_s")
    assert a["hedged_tasks"] == 0
    assert a == {**b, "policy": "hedge"}


def test_options_are_hedges_of_the_best_server_with_sane_estimates() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = HedgeScheduler(focus=None)
    policy.reset(3)
    seen = 0
    decision = sim.next_decision()
    while decision is not None and seen < 30:
        if decision.task.kind == "llm" and decision.mask.sum() >= 3:
            task = decision.task
            q = np.exp(policy.predictor.tokens(token_inputs(task)) + token_baseline(task))
            t_hi = max(2, round(float(q[0, QUANTILES.index(0.9)])))
            d_med, d_hi = decision.at_output_tokens(t_hi // 2), decision.at_output_tokens(t_hi)
            cands = np.flatnonzero(decision.mask)[:3]
            options = policy.options(Candidates(decision, q, d_med, d_hi, cands))
            assert {len(o.servers) for o in options} == {2, 3}
            for o in options:
                assert o.servers[0] == cands[0] and len(set(o.servers)) == len(o.servers)
                # E[min] over copies never exceeds E[first copy] on the same samples.
                assert o.gain_s >= 0 and o.extra_s >= 0 and o.harm_s >= 0
            # A third copy can only add to the first finish's gain over the same samples.
            gain = {o.servers: o.gain_s for o in options}
            three = tuple(int(c) for c in cands)
            assert gain[three] >= max(gain[three[:2]], gain[(three[0], three[2])]) - 1e-9
            seen += 1
        sim.apply(policy.select(decision))
        decision = sim.next_decision()
    assert seen == 30


@pytest.mark.parametrize("budget", [0.02, 0.1])
def test_hedges_run_for_real_within_the_budget(budget: float) -> None:
    """Price 0, no focus: it hedges whenever the budget allows; every task still runs once,
    and its own account of extra time never passes the budget."""
    policy = HedgeScheduler(price=0.0, budget=budget, focus=None)
    m = simulate(SPEC, JOBS, policy, seed=1, tables=TABLES).metrics
    assert int(m["hedged_tasks"]) > 0 and float(m["extra_server_seconds"]) > 0
    assert m["tasks_completed"] == sum(len(j.workflow.tasks) for j in JOBS)
    assert 0 < policy.extra_s <= budget * policy.work_s


def test_a_larger_budget_buys_more_hedges() -> None:
    small = simulate(SPEC, JOBS, HedgeScheduler(price=0.0, budget=0.01, focus=None), seed=1)
    large = simulate(SPEC, JOBS, HedgeScheduler(price=0.0, budget=0.2, focus=None), seed=1)
    assert int(large.metrics["hedged_tasks"]) > int(small.metrics["hedged_tasks"])


def test_focus_hedges_only_workflows_headed_for_the_tail() -> None:
    focused = HedgeScheduler(price=0.0, budget=1.0, focus=0.9)
    free = HedgeScheduler(price=0.0, budget=1.0, focus=None)
    a = int(simulate(SPEC, JOBS, focused, seed=1, tables=TABLES).metrics["hedged_tasks"])
    b = int(simulate(SPEC, JOBS, free, seed=1, tables=TABLES).metrics["hedged_tasks"])
    assert 0 < a < 0.4 * b


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        HedgeScheduler(max_copies=5, candidates=4)
    with pytest.raises(ValueError):
        HedgeScheduler(focus=1.0)


def test_hedge_returns_hedge_actions_and_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from scalesched.cluster import get_cluster\n"
        "from scalesched.policies.hedge import HedgeScheduler\n"
        "from scalesched.sim.run import simulate\n"
        "from scalesched.decision.features import ClusterTables\n"
        "from scalesched.sim.scenario import Scenario, build_jobs\n"
        "spec = get_cluster('hetero-4')\n"
        "jobs = build_jobs(ClusterTables(spec), Scenario(workflows=8, rate=0.3, seed=1))\n"
        "m = simulate(spec, jobs, HedgeScheduler(price=0.0, focus=None)).metrics\n"
        "assert m['hedged_tasks'] > 0, m\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hedge_answer_type() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = HedgeScheduler(price=0.0, budget=1.0, focus=None)
    kinds = set()
    decision = sim.next_decision()
    while decision is not None:
        answer = policy.select(decision)
        kinds.add(type(answer))
        if isinstance(answer, Hedge):
            assert all(decision.mask[s] for s in answer.servers)
            assert answer.servers[0] == int(np.argmin(policy.tail.scores(decision)))
        sim.apply(answer)
        decision = sim.next_decision()
    assert kinds == {int, Hedge}
