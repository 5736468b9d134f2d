"""The statistics every figure the package prints comes from, in one module.

* Steady state of one run: the warm-up cut (``warmup_cut``: MSER-5, and MSER over 200
  batches), a mean's interval by batch means (``batch_means``), the drift test on batch
  means (``trend_p_value``).
* Comparisons on common random numbers: the paired ratio of two policies' means on the same
  workflows (``paired_batch_ratio``: paired batch means within a run, pooled over seeds),
  and, for figures read back without per-workflow series, seed-paired replications
  (``paired_ratio_ci``: Student t over seeds).
* Means over seeds (``mean_ci``), Student t: studies run a handful of seeds, too few for a
  normal approximation or a bootstrap.

It sits below every layer (plain numpy and scipy, nothing of the package), so the
executors' run metrics, the studies and the research scripts compute a figure the same
way. The methods are fixed in advance (docs/steady-state.md); no caller picks whichever
interval is tighter.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

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


# --- Steady state: the warm-up cut, one run's confidence interval, the verdict's tests ---
#
# Fixed in advance, the same for every run the package reports (docs/steady-state.md):
# the warm-up is MSER-5's cut; a run's interval comes from batch means whose batches are
# grown until their lag-1 autocorrelation is not significant; a comparison pairs batches
# of the same workflows within a run and pools the runs of several seeds.

MSER_BATCH = 5
"""MSER-5: the statistic is computed on means of 5 consecutive observations (White, 1997)."""
MSER_MIN_KEPT_BATCHES = 10
"""MSER never keeps fewer than this many batches of 5 (its statistic is erratic at the end
of a series, where a handful of values can have a small spread by chance)."""
MIN_BATCHES = 10
"""Batch means never use fewer batches than this (a t interval over fewer is too wide to
say anything, and the lag-1 test has no power)."""
START_BATCHES = 200
"""The lag-1 test starts from this many batches and doubles the batch size from there."""
MAX_BATCHES = 20
"""Intervals and the trend test use at most this many batches, however small the batch
the lag-1 test accepts (Schmeiser, 1982: 10 to 30 batches). The lag-1 test sees only the
neighbouring batch: a queue near saturation, or a run whose arrivals happen to thin out
and crowd back, is correlated over hundreds of workflows, and a t test over 200 small
batches then calls such a stationary run's drift significant. Measured on planned
hetero-16 at load 0.7 (``tail``, 4000 workflows, 13 seeds, 2026-12-05): over the accepted
200 batches the trend test gave p < 0.01 on 2 of 13 runs (0.0002 and 0.008); over 20
batches, on none (smallest 0.0105)."""
LAG1_ALPHA = 0.05
"""One-sided level of the test that batch means are uncorrelated (Law and Kelton)."""


MSER_COARSE_BATCHES = 200
"""The second pass of the warm-up search runs MSER on this many batches (``warmup_cut``)."""


def mser_cut(series: Sequence[float] | np.ndarray, batch: int) -> int:
    """How many leading observations MSER truncates on means of ``batch`` consecutive
    observations: the cut ``d`` (a multiple of ``batch``) that minimises the squared
    standard error of the mean of what is kept, ``sum((Y_i - mean)^2) / k^2`` over the
    ``k`` batch means kept after ``d``. The search runs over the whole series (bar the last
    ``MSER_MIN_KEPT_BATCHES`` batches); a cut in the second half means the run is too
    short to have a steady part, which the caller's verdict says. NaN values (workflows
    that never finished) are not allowed: a run that left measured workflows unfinished is
    not steady anyway."""
    y = np.asarray(series, dtype=float)
    nb = y.size // batch
    if nb <= MSER_MIN_KEPT_BATCHES:
        return 0
    means = y[: nb * batch].reshape(nb, batch).mean(axis=1)
    tail = means[::-1]  # kept batches, counted from the end
    k = np.arange(1, nb + 1, dtype=float)
    s1 = np.cumsum(tail)
    s2 = np.cumsum(tail * tail)
    spread = np.maximum(s2 - s1 * s1 / k, 0.0)  # sum of squares about the kept mean
    stat = (spread / (k * k))[::-1]  # index d: cut d batches, keep nb - d
    candidates = stat[: nb - MSER_MIN_KEPT_BATCHES + 1]
    return int(np.argmin(candidates)) * batch


def mser5_cut(series: Sequence[float] | np.ndarray) -> int:
    """MSER-5's cut (batches of 5; White, 1997). Hoad, Robinson and Davies (2010) found
    MSER-5 the most reliable automatic warm-up method."""
    return mser_cut(series, MSER_BATCH)


def warmup_cut(series: Sequence[float] | np.ndarray) -> int:
    """The warm-up every run leaves out: the later of MSER-5's cut and MSER's cut over
    ``MSER_COARSE_BATCHES`` batches.

    Why two passes: MSER-5 weighs a transient against the spread of means of 5 responses,
    and agentic responses spread from seconds to minutes. A deployment starts empty and
    fills over thousands of workflows at high load, a rise of a few seconds per workflow
    that MSER-5 does not see: on planned hetero-48 at load 0.9 (``tail``, 24,000
    workflows) it cut 150 workflows of a rise from 30 to 38 s that lasts about 6000, the
    kept mean was 4% low and the drift test called the run rising. Over 200 batches the
    same rise stands out (cut 6264; no drift left, p = 0.39). Where the cold start is short
    and steep, MSER-5's finer cut is the later one and stands."""
    y = np.asarray(series, dtype=float)
    coarse = max(MSER_BATCH, y.size // MSER_COARSE_BATCHES)
    return max(mser5_cut(y), mser_cut(y, coarse))


@dataclass(frozen=True)
class BatchMeans:
    """A run's mean with the half-width of its confidence interval by batch means."""

    mean: float
    half_width: float
    batches: int
    batch_size: int
    lag1: float
    """Lag-1 autocorrelation of the batch means used."""
    means: np.ndarray
    """The batch means, in order (the trend test reads them)."""

    @property
    def method(self) -> str:
        return f"batch means ({self.batches} batches of {self.batch_size})"


def lag1_autocorrelation(x: np.ndarray) -> float:
    """Sample lag-1 autocorrelation (0 for a constant or too short series)."""
    if x.size < 3:
        return 0.0
    d = x - x.mean()
    denom = float(d @ d)
    return float(d[:-1] @ d[1:]) / denom if denom > 0 else 0.0


def _batch_size(values: np.ndarray) -> int:
    """The batch size: the smallest, doubling from ``n / START_BATCHES``, whose batch means
    show no significant positive lag-1 autocorrelation (one-sided ``LAG1_ALPHA``; under no
    correlation the sample value is about normal with variance 1/b), never leaving more
    than ``MAX_BATCHES`` or fewer than ``MIN_BATCHES`` batches."""
    n = values.size
    return max(_uncorrelated_size(values), -(-n // MAX_BATCHES))


def _uncorrelated_size(values: np.ndarray) -> int:
    from scipy import stats as sps

    n = values.size
    z = float(sps.norm.ppf(1 - LAG1_ALPHA))
    size = max(1, n // START_BATCHES)
    while True:
        b = n // size
        if b <= MIN_BATCHES:
            return max(1, n // MIN_BATCHES)
        means = _batched(values, size)
        if lag1_autocorrelation(means) <= z / math.sqrt(b):
            return size
        size *= 2


def _batched(values: np.ndarray, size: int) -> np.ndarray:
    """Means of consecutive batches of ``size``; a remainder is dropped from the front (the
    end of the warm-up), so every batch ends at the same place for every batch size."""
    b = values.size // size
    return values[values.size - b * size :].reshape(b, size).mean(axis=1)


def batch_means(series: Sequence[float] | np.ndarray, confidence: float = CONFIDENCE) -> BatchMeans:
    """The mean of one run's (already truncated) series and its Student-t interval over
    batch means, batches grown until uncorrelated (``_batch_size``)."""
    from scipy import stats as sps

    y = np.asarray(series, dtype=float)
    if y.size < MIN_BATCHES:
        m = float(y.mean()) if y.size else math.nan
        return BatchMeans(m, math.nan, 0, 0, 0.0, np.zeros(0))
    size = _batch_size(y)
    means = _batched(y, size)
    b = means.size
    sd = float(means.std(ddof=1))
    q = float(sps.t.ppf(0.5 + confidence / 2, b - 1))
    return BatchMeans(
        float(means.mean()), q * sd / math.sqrt(b), b, size, lag1_autocorrelation(means), means
    )


@dataclass(frozen=True)
class RatioCI:
    """A paired ratio of means (numerator over denominator) with its interval."""

    ratio: float
    half_width: float
    method: str
    runs: int


def paired_batch_ratio(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]], confidence: float = CONFIDENCE
) -> RatioCI:
    """The ratio of two policies' mean response times on the same workflows, over one or
    more runs (seeds): per run, the ratio of the two means over the shared window, and its
    variance by paired batch means of the linearised difference ``a - r b`` (the delta
    method for a ratio of means); over runs, the mean of the per-run ratios with the
    variances pooled (runs are independent replications of one steady state). Each pair
    holds the two series of one run, aligned workflow by workflow."""
    from scipy import stats as sps

    ratios: list[float] = []
    variances: list[float] = []
    dof = 0
    batches = 0
    for a, b in pairs:
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if a.size != b.size or a.size < MIN_BATCHES or b.mean() <= 0:
            continue
        r = float(a.mean() / b.mean())
        resid = a - r * b
        size = _batch_size(resid)
        d = _batched(resid, size)
        bm = _batched(b, size).mean()
        ratios.append(r)
        variances.append(float(d.var(ddof=1)) / d.size / (bm * bm))
        dof += d.size - 1
        batches += d.size
    if not ratios:
        return RatioCI(math.nan, math.nan, "no paired runs", 0)
    k = len(ratios)
    q = float(sps.t.ppf(0.5 + confidence / 2, max(dof, 1)))
    half = q * math.sqrt(sum(variances)) / k
    method = f"paired batch means ({batches} batches over {k} run{'s' if k > 1 else ''})"
    return RatioCI(sum(ratios) / k, half, method, k)


def trend_p_value(means: np.ndarray) -> float:
    """Two-sided p-value of the least-squares slope of ``means`` against their index (a
    t test with b - 2 degrees of freedom): small when the series drifts up or down."""
    from scipy import stats as sps

    b = means.size
    if b < 4:
        return 1.0
    x = np.arange(b, dtype=float)
    fit = sps.linregress(x, means)
    if not math.isfinite(fit.stderr) or fit.stderr == 0:
        return 1.0 if fit.slope == 0 else 0.0
    return float(fit.pvalue)


def trend_slope(means: np.ndarray) -> float:
    """The least-squares slope of ``means`` against their index (its sign says whether a
    significant trend rises or falls; the end points alone can say the opposite)."""
    if means.size < 2:
        return 0.0
    x = np.arange(means.size, dtype=float)
    return float(np.polyfit(x, means, 1)[0])
