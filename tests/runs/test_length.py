"""``--workflows auto``: which lengths it tries and when it stops."""

from __future__ import annotations

import pytest

from scalesched.errors import InputError
from scalesched.runs.length import (
    Attempt,
    check_steady_arrivals,
    grow,
    next_length,
    parse_workflows,
    start_workflows,
)


def test_parse_workflows_takes_auto_or_a_count() -> None:
    assert parse_workflows("auto") is None and parse_workflows(" AUTO ") is None
    assert parse_workflows("1500") == 1500 and parse_workflows(7) == 7
    for bad in ("0", "-5", "1e9", "many", "2000000"):
        with pytest.raises(InputError):
            parse_workflows(bad)


def _lengths(n_servers: int, cap: int, span_responses: float | None = None) -> list[int]:
    """The lengths ``grow`` tries when no attempt is ever precise."""
    _, tried = grow(
        lambda n: Attempt(n, 30.0, 30.0, steady=False, span_responses=span_responses),
        n_servers,
        0.01,
        cap=cap,
    )
    return [a.workflows for a in tried]


def test_lengths_double_from_a_size_dependent_start_to_the_cap() -> None:
    assert _lengths(16, cap=20_000) == [2000, 4000, 8000, 20000]  # not 16,000 then 20,000
    assert _lengths(16, cap=32_000) == [2000, 4000, 8000, 16000, 32000]
    assert start_workflows(1024) == 16 * 1024  # arrivals must span several responses
    assert _lengths(16, cap=1000) == [1000]
    assert _lengths(16, cap=20_000, span_responses=40.0) == [2000, 4000, 8000, 20000]


def test_a_window_spanning_few_responses_jumps_to_a_length_that_spans_enough() -> None:
    """hetero-48 on a planned deployment: 2000 workflows span about 1.6 responses, so the
    next run is the one that spans 16 (20,000 workflows), not 4000."""

    def attempt(n: int) -> Attempt:
        return Attempt(n, 1.02, 0.05, steady=False, span_responses=1.6 * n / 2000)

    _, tried = grow(attempt, 48, 0.01, cap=64_000)
    assert [a.workflows for a in tried][:2] == [2000, 20_000]
    assert next_length(Attempt(3000, 30.0, 1.0, steady=True, span_responses=15.0), 5000) == 5000
    # the demo's case: 2000 workflows at N = 48 want 15,000; the cap of 16,000 is taken
    assert next_length(Attempt(2000, 1.0, 0.01, steady=False, span_responses=2.2), 16_000) == 16_000


def test_grow_stops_at_the_first_precise_steady_length() -> None:
    tried: list[int] = []

    def attempt(n: int) -> Attempt:
        tried.append(n)
        return Attempt(n, 30.0, 60.0 / n**0.5, steady=n >= 4000)  # half-width falls as 1/sqrt(n)

    final, all_tried = grow(attempt, 16, 0.02, cap=64_000)
    # 4000: steady but 3.2% wide; 8000: 2.2%; 16000: 1.6% -> stop.
    assert tried == [2000, 4000, 8000, 16000] and final.workflows == 16000
    assert final.precise(0.02) and len(all_tried) == 4


def test_grow_stops_at_once_on_an_overloaded_run_and_at_the_cap() -> None:
    lines: list[str] = []
    final, tried = grow(
        lambda n: Attempt(n, 500.0, 90.0, steady=False, overloaded=True), 16, 0.01, say=lines.append
    )
    assert len(tried) == 1 and "overloaded" in lines[0] and not final.precise(0.01)
    final, tried = grow(lambda n: Attempt(n, 30.0, 3.0, steady=True), 16, 0.01, cap=8000)
    assert [a.workflows for a in tried] == [2000, 4000, 8000] and not final.precise(0.01)


def test_arrivals_with_no_steady_state_are_refused_for_auto() -> None:
    check_steady_arrivals("poisson")
    check_steady_arrivals("bursty")
    for shape in ("azure-conv", "replay:times.csv"):
        with pytest.raises(InputError, match="no run length reaches a steady state"):
            check_steady_arrivals(shape)
