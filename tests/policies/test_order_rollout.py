"""order_rollout: the base's server always; where the call would wait, the cheaper of its
workflow's order and its own in forks on sampled futures; the base's order elsewhere."""

from __future__ import annotations

import pytest

from scalesched.decision.actions import Place, as_action, workflow_order
from scalesched.policies import get_policy
from scalesched.policies.order_rollout import OrderRolloutScheduler
from scalesched.runs.setup import Scenario, prepare, run
from scalesched.sim.engine import Simulation

BUSY = Scenario(workload="test-time-scaling", workflows=60, load=1.0, seed=100_321)
"""A dynamic-residency run with admission queues (models load on demand, load 1.0)."""


def _sim() -> Simulation:
    setup = prepare("hetero-8", BUSY, stream=False)
    return Simulation(setup.cluster, setup.jobs, tables=setup.tables)


def _answers(policy: OrderRolloutScheduler) -> list[tuple[Place, Place, bool]]:
    """Per decision: the base's answer, the policy's and whether the call was contested,
    with the policy's answer applied (the run is the policy's own)."""
    sim = _sim()
    policy.reset(7)
    base = get_policy(policy.base)
    seen = []
    decision = sim.next_decision()
    while decision is not None:
        theirs = as_action(base.select(decision))
        ours = policy.select(decision)
        assert isinstance(theirs, Place) and isinstance(ours, Place)
        seen.append((theirs, ours, policy.contested(decision, ours.server)))
        assert ours.priority in (workflow_order(decision), decision.now, None)
        sim.apply(ours)
        decision = sim.next_decision()
    return seen


@pytest.mark.parametrize("base", ["fcfs_workflow", "tail"])
def test_it_keeps_the_bases_server_and_changes_only_contested_orders(base: str) -> None:
    policy = OrderRolloutScheduler(base=base, horizon_s=5.0, forks=1)
    seen = _answers(policy)
    assert all(ours.server == theirs.server for theirs, ours, _ in seen)
    assert all(ours == theirs for theirs, ours, contested in seen if not contested)
    contested = sum(c for _, _, c in seen)
    assert contested > 10 and policy.stats["rolled"] == contested
    assert 0 < policy.stats["changed"] < contested  # both orders win somewhere


def test_the_same_seed_gives_the_same_run() -> None:
    a = run(prepare("hetero-8", BUSY), "order_rollout:horizon_s=5").metrics
    b = run(prepare("hetero-8", BUSY), "order_rollout:horizon_s=5").metrics
    for m in (a, b):
        m.pop("sim_wall_time_s")
    assert a == b


def test_its_base_must_be_one_of_the_two_orders() -> None:
    with pytest.raises(ValueError, match="base must be fcfs_workflow or tail"):
        OrderRolloutScheduler(base="eft")


def test_placement_options_are_refused_as_not_applying() -> None:
    with pytest.raises(ValueError, match="candidates do not apply"):
        OrderRolloutScheduler(candidates=4)
