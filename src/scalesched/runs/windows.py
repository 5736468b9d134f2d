"""The steady-state window: how many workflows at each end of a run are left out.

A run's first workflows meet an empty cluster and its last ones a draining one; neither is
the steady state a load describes, so every measurement (a run, a study, capacity probes)
leaves them out (docs/steady-state.md).
"""

from __future__ import annotations

WARMUP_FRACTION = 0.2
"""Share of a run's workflows (the first, by arrival) run but not measured."""
COOLDOWN_FRACTION = 0.1
"""Share of a run's workflows (the last, by arrival) run but not measured."""


def default_warmup(workflows: int) -> int:
    return int(round(WARMUP_FRACTION * workflows))


def default_cooldown(workflows: int) -> int:
    return int(round(COOLDOWN_FRACTION * workflows))
