"""The window that runs compared on the same workflows share."""

from __future__ import annotations

import pytest

from scalesched.runs.windows import shared_warmup_cut


@pytest.mark.parametrize(
    ("runs", "cut"),
    [
        ([(100, True), (600, True)], 600),  # the slowest settled cold start
        ([(100, True), (300, True), (2700, False)], 300),  # an unsettled run does not set it
        ([(100, False), (2700, False)], 2700),  # none settled: the largest, as before
        ([], 0),
    ],
)
def test_the_largest_cut_among_the_steady_runs(runs: list[tuple[int, bool]], cut: int) -> None:
    assert shared_warmup_cut(runs) == cut
