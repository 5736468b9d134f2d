"""One definition of "the best heuristic", used by every table, the demo and eval."""

from __future__ import annotations

import math

from scalesched.policies import (
    BEST_HEURISTIC_CANDIDATES,
    HEURISTICS,
    STRONG_HEURISTICS,
    best_heuristic,
)
from scalesched.runs.capacity import CAPACITY_POLICIES


def test_the_candidates_are_heuristics_and_include_tail() -> None:
    assert set(BEST_HEURISTIC_CANDIDATES) <= set(HEURISTICS)
    assert "tail" in BEST_HEURISTIC_CANDIDATES  # the strongest at steady state
    assert STRONG_HEURISTICS is BEST_HEURISTIC_CANDIDATES  # one tuple, not two lists
    # capacity asks another question with its own list, drawn from the same candidates
    assert set(CAPACITY_POLICIES) <= set(BEST_HEURISTIC_CANDIDATES)


def test_the_lowest_mean_of_the_candidates_present() -> None:
    assert best_heuristic({"eft": 30.0, "tail": 28.0, "kv_aware": 40.0}) == "tail"
    assert best_heuristic({"eft": [30.0, 26.0], "tail": [28.0, 29.0]}) == "eft"  # 28 < 28.5


def test_policies_that_are_not_candidates_never_win() -> None:
    results = {"scale": 10.0, "random": 5.0, "hedge": 4.0, "soft_eft": 31.0, "eft": 32.0}
    assert best_heuristic(results) == "soft_eft"
    assert best_heuristic({"scale": 10.0, "random": 5.0}) is None


def test_undefined_results_are_skipped_and_ties_go_to_the_earlier_candidate() -> None:
    assert best_heuristic({"eft": math.nan, "tail": 40.0}) == "tail"
    assert best_heuristic({"tail": 30.0, "eft": 30.0}) == "eft"
    assert best_heuristic({}) is None
