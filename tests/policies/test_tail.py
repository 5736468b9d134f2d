"""tail and pred_mean: feasible, quantile-ordered, and torch-free at decision time; the
scale-out signal of tail_scaleout."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.policies.tail import TailScheduler
from scalesched.sim.engine import Simulation
from scalesched.sim.scenario import Scenario, build_jobs

SPEC = get_cluster("hetero-8")
TABLES = ClusterTables(SPEC)
JOBS = build_jobs(TABLES, Scenario(workflows=30, rate=0.8, seed=3))


def test_higher_level_predicts_later_finish() -> None:
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    low, high, mean = TailScheduler(0.5), TailScheduler(0.95), get_policy("pred_mean")
    learned = TailScheduler(via="finish")
    assert isinstance(mean, TailScheduler)
    decision = sim.next_decision()
    llm = 0
    while decision is not None:
        a, b = low.scores(decision), high.scores(decision)
        ok = decision.mask
        assert (b[ok] >= a[ok]).all() and np.isinf(b[~ok]).all()
        if decision.task.kind == "llm":
            assert high.output_tokens(decision) > low.output_tokens(decision)
            llm += 1
        assert np.isfinite(mean.scores(decision)[ok]).all()
        assert ok[learned.select(decision)]
        sim.apply(high.select(decision))
        decision = sim.next_decision()
    assert llm > 50 and sim.done


def test_tail_reads_the_hint() -> None:
    """Same decision, larger difficulty hint: longer predicted output."""
    import dataclasses

    sim = Simulation(SPEC, JOBS, tables=TABLES)
    decision = sim.next_decision()
    while decision is not None and decision.task.kind != "llm":
        sim.apply(int(np.flatnonzero(decision.mask)[0]))
        decision = sim.next_decision()
    assert decision is not None
    policy = TailScheduler()
    decision.task = dataclasses.replace(decision.task, difficulty_hint=1.5)
    long = policy.output_tokens(decision)
    decision.task = dataclasses.replace(decision.task, difficulty_hint=-1.5)
    assert long > 3 * policy.output_tokens(decision)


def test_remembered_output_lengths_are_the_predictors_and_copies_share_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The token memo changes no answer (every decision of a run against a fresh predictor
    call), a deep copy (one per rollout fork) shares the predictor and the memo and copies
    the rest, and the memo is bounded."""
    import copy

    import scalesched.policies.tail as tail
    import scalesched.predict.lengths as lengths

    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy, level = TailScheduler(), TailScheduler().level
    assert level is not None
    decision, seen = sim.next_decision(), 0
    while decision is not None:
        if decision.task.kind == "llm":
            q = policy._token_quantiles(decision)[0, tail.QUANTILES.index(level)]
            assert policy.output_tokens(decision) == max(1, int(round(float(q))))
            assert policy.output_tokens(decision) == max(1, int(round(float(q))))  # remembered
            seen += 1
        sim.apply(policy.select(decision))
        decision = sim.next_decision()
    assert seen > 50 and 0 < len(policy.lengths.memo) <= seen
    policy.exec_scale = np.ones(TABLES.n)
    clone = copy.deepcopy(policy)
    assert clone.predictor is policy.predictor and clone.lengths is policy.lengths
    assert clone.exec_scale is not policy.exec_scale and clone.level == policy.level
    monkeypatch.setattr(lengths, "TOKEN_MEMO_SIZE", 3)
    fresh, sim = TailScheduler(), Simulation(SPEC, JOBS, tables=TABLES)
    decision = sim.next_decision()
    while decision is not None:
        if decision.task.kind == "llm":
            fresh.output_tokens(decision)
            assert len(fresh.lengths.memo) <= 3
        sim.apply(fresh.select(decision))
        decision = sim.next_decision()


def test_exec_scale_slows_only_the_scaled_servers() -> None:
    """Adaptation's factor: 1 everywhere is the cost model as is; a slower server scores
    later, the others do not move, tools ignore it, and reset clears it."""
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    policy = TailScheduler()
    decision = sim.next_decision()
    checked = {"llm": 0, "tool": 0}
    while decision is not None:
        ok = decision.mask
        policy.exec_scale = None
        plain = policy.scores(decision)
        policy.exec_scale = np.ones(decision.n_servers)
        np.testing.assert_allclose(policy.scores(decision)[ok], plain[ok], rtol=1e-12)
        slowed = int(np.argmin(plain))
        policy.exec_scale[slowed] = 3.0
        scaled = policy.scores(decision)
        others = ok.copy()
        others[slowed] = False
        np.testing.assert_array_equal(scaled[others], plain[others])
        if decision.task.kind == "llm":
            assert scaled[slowed] > plain[slowed]
        else:
            assert scaled[slowed] == plain[slowed]
        checked[decision.task.kind] += 1
        sim.apply(slowed)
        decision = sim.next_decision()
    assert min(checked.values()) > 20
    policy.reset(0)
    assert policy.exec_scale is None


def test_tail_never_imports_torch() -> None:
    code = (
        "import sys\n"
        "from scalesched.cluster import get_cluster\n"
        "from scalesched.policies import get_policy\n"
        "from scalesched.sim.run import simulate\n"
        "from scalesched.decision.features import ClusterTables\n"
        "from scalesched.sim.scenario import Scenario, build_jobs\n"
        "spec = get_cluster('hetero-4')\n"
        "jobs = build_jobs(ClusterTables(spec), Scenario(workflows=5, rate=0.3, seed=1))\n"
        "simulate(spec, jobs, get_policy('tail'))\n"
        "simulate(spec, jobs, get_policy('tail_scaleout'))\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_scale_out_never_asking_changes_nothing() -> None:
    """With an SLO no call misses, tail_scaleout is tail: same numbers, no replica keys."""
    from scalesched.sim.run import simulate

    plain = simulate(SPEC, JOBS, TailScheduler(), seed=2, tables=TABLES).metrics
    never = TailScheduler(scale_out=True, slo=1e12)
    quiet = simulate(SPEC, JOBS, never, seed=2, tables=TABLES).metrics
    plain.pop("sim_wall_time_s"), quiet.pop("sim_wall_time_s")
    assert quiet == plain


def test_scale_out_asks_for_a_free_replica_when_p99_misses_the_slo() -> None:
    """Every request names the call's model on a free server without it, other than the
    chosen one, only while no load of that model is pending, and only when the chosen
    server's p99 finish exceeds slo x the contention-free time; a stricter SLO asks more."""
    from scalesched.cluster.tables import MODEL_NAMES
    from scalesched.decision import LoadReplica, Place
    from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING

    eager, lax = TailScheduler(scale_out=True, slo=1.0), TailScheduler(scale_out=True)
    sim = Simulation(SPEC, JOBS, tables=TABLES)
    asked = {"eager": 0, "lax": 0}
    decision = sim.next_decision()
    while decision is not None:
        answer = eager.select(decision)
        asked["lax"] += isinstance(lax.select(decision), Place)
        if isinstance(answer, Place):
            asked["eager"] += 1
            (load,) = answer.loads
            assert isinstance(load, LoadReplica) and load.idle_s == eager.idle_s
            m = decision.task.model
            assert load.model == MODEL_NAMES[m] and load.server != answer.server
            assert sim.engine_state[load.server, m] == ENGINE_ABSENT
            assert sim.free_gpus[load.server] >= TABLES.tp[load.server, m]
            assert not (sim.engine_state[:, m] == ENGINE_LOADING).any()
            assert answer.server == int(np.argmin(eager.scores(decision)))
        sim.apply(answer)
        decision = sim.next_decision()
    assert sim.done and asked["eager"] > asked["lax"] and asked["eager"] >= 3
    assert sim._replicas.loads == asked["eager"]  # each one fitted when asked


def test_scale_out_options_are_checked() -> None:
    import pytest

    with pytest.raises(ValueError, match="slo"):
        TailScheduler(scale_out=True, slo=0.5)
    with pytest.raises(ValueError, match="idle_s"):
        TailScheduler(scale_out=True, idle_s=0.0)
