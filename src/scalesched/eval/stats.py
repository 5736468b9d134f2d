"""The statistics every study reports: a mean over seeds with the half-width of its 95%
confidence interval, and seed-paired ratios (common random numbers).

One implementation for the package (``eval/report.py``, ``eval/slo.py``) and the research
scripts, so a figure in a doc and the same figure in ``scalesched eval``'s summary are
computed the same way. Intervals are Student t over seeds: studies run a handful of seeds,
too few for a normal approximation or a bootstrap.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeVar

CONFIDENCE = 0.95
"""Two-sided level of every interval the package prints."""


class _Ordered(Protocol):
    """A key that sorts (a seed, or a tuple of seed and cell), so pairs come in one order."""

    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Ordered)


def mean_ci(values: Iterable[float | None], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Mean and half-width of its two-sided Student-t confidence interval over seeds.

    None and NaN values (a run that did not produce the figure) are left out rather than
    poisoning the mean. No value gives (nan, nan); one value gives (mean, nan), because one
    seed says nothing about the spread and a zero half-width would claim certainty."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    vals = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return math.nan, math.nan
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return m, math.nan
    from scipy import stats  # the import costs ~0.2 s; only studies pay it

    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    quantile = float(stats.t.ppf(0.5 + confidence / 2, len(vals) - 1))
    return m, quantile * sd / math.sqrt(len(vals))


def half_width(values: Iterable[float | None], confidence: float = CONFIDENCE) -> float:
    """Half-width of the Student-t confidence interval of the mean of ``values``
    (``mean_ci``'s second figure; NaN with fewer than two finite values)."""
    return mean_ci(values, confidence)[1]


def mean_ci_text(values: Iterable[float | None], digits: int = 3, empty: str = "-") -> str:
    """``"mean ± half-width"`` at ``digits`` decimals, the cell the research tables print;
    ``empty`` when there is no finite value."""
    m, h = mean_ci(values)
    return empty if math.isnan(m) else f"{m:.{digits}f} ± {h:.{digits}f}"


def mean_sd(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0.0 for a single value): the spread of the runs
    themselves, for tables that describe seeds rather than bound the mean."""
    vals = list(values)
    if not vals:
        raise ValueError("mean_sd of no values")
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


def paired_ratios(numerator: Mapping[K, float], denominator: Mapping[K, float]) -> list[float]:
    """``numerator[k] / denominator[k]`` for every key both have (a seed, or a seed and a
    cell), in sorted key order. Pairing on the same seed compares two policies on the same
    workflows and arrivals, which removes most of the seed-to-seed variance a ratio of two
    separate means would carry."""
    common = sorted(set(numerator) & set(denominator))
    return [numerator[k] / denominator[k] for k in common]


def paired_ratio_ci(
    numerator: Mapping[K, float], denominator: Mapping[K, float], confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Mean over the common keys of the seed-paired ratio and the half-width of its
    confidence interval (``paired_ratios`` then ``mean_ci``); (nan, nan) with no common key."""
    return mean_ci(paired_ratios(numerator, denominator), confidence)
