"""The steady-state window: how many workflows at each end of a run are left out.

A run's first workflows meet an empty cluster and its last ones a draining one; neither is
the steady state a load describes, so every measurement (a run, a study, capacity probes)
leaves them out (docs/steady-state.md). Runs compared on the same workflows share one
window (``shared_warmup_cut``).
"""

from __future__ import annotations

from collections.abc import Iterable

WARMUP_FRACTION = 0.2
"""Share of a run's workflows (the first, by arrival) run but not measured."""
COOLDOWN_FRACTION = 0.1
"""Share of a run's workflows (the last, by arrival) run but not measured."""


def default_warmup(workflows: int) -> int:
    return int(round(WARMUP_FRACTION * workflows))


def default_cooldown(workflows: int) -> int:
    return int(round(COOLDOWN_FRACTION * workflows))


def shared_warmup_cut(runs: Iterable[tuple[int, bool]]) -> int:
    """The warm-up cut of runs compared on the same workflows, from each run's (MSER cut,
    steady verdict): the largest among the steady runs, so that no settled run's cold
    start is measured; among all where none is steady. A run that never settled (a queue
    still growing, or one that settles only in its second half) has a late, arbitrary
    cut: taking it would shrink every run's window to the last few hundred workflows
    (pcie-lab at load 0.8, 16000 workflows: 936 and 165 of 14,400, set by a candidate
    whose queue kept growing). Such a run is measured over the same window and keeps its
    verdict, so nothing compared with it counts as steady."""
    pairs = list(runs)
    settled = [cut for cut, steady in pairs if steady] or [cut for cut, _ in pairs]
    return max(settled, default=0)
