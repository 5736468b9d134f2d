"""Samples from a predicted quantile function, for Monte-Carlo decisions (``hedge``).

A forecast is a row of quantiles at ``QUANTILES``; samples come by the inverse CDF at
uniform levels, read off the quantile function the same way the scores read it
(:func:`scalesched.predict.metrics.on_grid`: log-linear between predicted levels, flat
beyond the outermost ones, so a sample never exceeds the predicted q0.99). The levels are
stratified (one uniform per 1/n slice), which keeps the sample mean close to the forecast's
mean with a few hundred draws.
"""

from __future__ import annotations

import numpy as np

from scalesched.predict.metrics import on_grid


def stratified_levels(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) levels in (0, 1), one uniform draw in each slice [i/n, (i+1)/n), shuffled (so
    that pairing them with other draws does not correlate them)."""
    return rng.permutation((np.arange(n) + rng.random(n)) / n)


def sample_quantiles(q: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(k, n) values of each of the k forecasts ``q`` (k, Q) at ``levels`` (n,)."""
    return on_grid(np.asarray(q, dtype=np.float64), levels)
