"""What a predictor learns from: per head, the inputs, the baseline (ln of the static
estimate), the truth and the static group of every recorded decision
(``scalesched.runs.traces`` records them from simulator runs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Samples:
    """Inputs, baselines (ln of the static estimate), truths and static groups per head."""

    tok_x: np.ndarray
    tok_base: np.ndarray
    tok_y: np.ndarray
    tok_group: np.ndarray
    dur_x: np.ndarray
    dur_base: np.ndarray
    dur_y: np.ndarray
    dur_group: np.ndarray
    fin_base: np.ndarray
    fin_y: np.ndarray
    """Seconds from the decision to the task's end (the finish head reads ``dur_x``)."""

    @staticmethod
    def concat(parts: list[Samples]) -> Samples:
        return Samples(
            **{
                f: np.concatenate([getattr(p, f) for p in parts])
                for f in Samples.__dataclass_fields__
            }
        )
