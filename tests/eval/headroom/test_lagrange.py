"""The capacity-aware bound's Lagrangian form: never above the whole program's value (weak
duality), close to it when priced on a sample, the whole program on a small window."""

from __future__ import annotations

import pytest

from scalesched.eval.headroom.bound import capacity_bound
from scalesched.eval.headroom.lagrange import evenly_spaced, lagrangian_capacity_bound
from scalesched.runs.setup import Scenario, prepare


@pytest.fixture(scope="module")
def window() -> tuple[object, list, float]:
    setup = prepare(
        "hetero-16",
        Scenario(workload="agentic-mix", workflows=40, load=0.9, seed=1, residency="planned"),
        stream=False,
    )
    jobs = sorted(setup.jobs, key=lambda j: (j.arrival, j.workflow_id))
    rate = setup.scenario.rate
    assert rate is not None
    return setup.tables, jobs, rate


def test_below_the_whole_program_and_close_to_it(window: tuple[object, list, float]) -> None:
    tables, jobs, rate = window
    whole = capacity_bound(tables, jobs, rate)  # type: ignore[arg-type]
    priced = lagrangian_capacity_bound(tables, jobs, rate, sample=20)  # type: ignore[arg-type]
    assert whole.mean_s is not None and priced.mean_s is not None
    assert priced.mean_s <= whole.mean_s * (1 + 1e-7)
    # a sample of half the window prices it within a few percent (0.001% at 100 of 263
    # on the same deployment, docs/headroom.md)
    assert priced.mean_s >= 0.95 * whole.mean_s
    assert priced.status.startswith("lagrangian (priced on 20 of 40")


def test_a_window_within_the_sample_gets_the_whole_program(
    window: tuple[object, list, float],
) -> None:
    tables, jobs, rate = window
    small = jobs[:10]
    whole = capacity_bound(tables, small, rate)  # type: ignore[arg-type]
    priced = lagrangian_capacity_bound(tables, small, rate, sample=10)  # type: ignore[arg-type]
    assert priced.mean_s == whole.mean_s and priced.status == "optimal"


def test_bad_sample() -> None:
    with pytest.raises(ValueError, match="sample must be >= 1"):
        lagrangian_capacity_bound(None, [], 1.0, sample=0)  # type: ignore[arg-type]


def test_evenly_spaced_keeps_both_ends() -> None:
    picks = evenly_spaced(list(range(10)), 4)  # type: ignore[arg-type]
    assert picks[0] == 0 and picks[-1] == 9 and len(picks) == 4
    assert evenly_spaced(list(range(3)), 5) == [0, 1, 2]  # type: ignore[arg-type]
