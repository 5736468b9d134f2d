"""The joint admission DP against the exact MILP, and the problem's invariants."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cache.admission import (
    UNPLACED,
    AdmissionProblem,
    _knapsack,
    random_problem,
    solve_dp,
    solve_milp,
)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("sessions", "nodes"), [(6, 2), (12, 3), (20, 5)])
def test_dp_is_feasible_and_within_two_percent_of_the_milp(
    seed: int, sessions: int, nodes: int
) -> None:
    problem = random_problem(sessions, nodes, seed=seed)
    dp, exact = solve_dp(problem), solve_milp(problem)
    assert exact.optimal
    assert problem.feasible(dp.node_of) and problem.feasible(exact.node_of)
    assert dp.total_value <= exact.total_value + 1e-9
    assert dp.total_value >= 0.98 * exact.total_value


def test_knapsack_is_exact_on_a_brute_force_instance() -> None:
    rng = np.random.default_rng(3)
    gain, weight = rng.normal(1, 1, 10), rng.integers(1, 8, 10)
    chosen = _knapsack(gain, weight, 15)
    best = max(
        (
            sum(gain[i] for i in range(10) if mask >> i & 1)
            for mask in range(1 << 10)
            if sum(weight[i] for i in range(10) if mask >> i & 1) <= 15
        ),
    )
    assert gain[chosen].sum() == pytest.approx(max(best, 0.0))


def test_nothing_worth_admitting_waits() -> None:
    problem = AdmissionProblem(
        value=np.array([[-1.0, -0.5], [2.0, 1.0]]),
        footprint=np.array([1, 5]),
        capacity=np.array([4, 5]),
    )
    node_of = solve_dp(problem).node_of
    assert node_of[0] == UNPLACED  # negative everywhere: never admitted
    assert node_of[1] == 1  # too big for node 0, worth admitting on node 1


def test_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="sessions"):
        AdmissionProblem(np.zeros((2, 3)), np.zeros(2, dtype=int), np.zeros(2, dtype=int))
