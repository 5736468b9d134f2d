"""The one statistics module: intervals checked against scipy and against hand values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from scalesched.stats import (
    half_width,
    mean_ci,
    mean_ci_text,
    mean_sd,
    paired_ratio_ci,
    paired_ratios,
)


def test_mean_ci_known_value() -> None:
    # mean 2, sd 1, t_{0.975, 2} = 4.302653 (t tables): half-width 4.302653/sqrt(3)
    m, h = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0
    assert h == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)


@pytest.mark.parametrize("n", [2, 3, 5, 10, 30])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_mean_ci_matches_scipy_interval(n: int, confidence: float) -> None:
    x = np.random.default_rng(n).lognormal(1.0, 0.5, n)
    lo, hi = sps.t.interval(confidence, n - 1, loc=x.mean(), scale=sps.sem(x))
    m, h = mean_ci(x.tolist(), confidence)
    assert m == pytest.approx(x.mean(), rel=1e-12)
    assert h == pytest.approx((hi - lo) / 2, rel=1e-10)
    assert half_width(x.tolist(), confidence) == h


def test_mean_ci_leaves_out_missing_values() -> None:
    assert mean_ci([1.0, None, math.nan, 3.0]) == mean_ci([1.0, 3.0])


def test_mean_ci_undefined_spread_is_nan_not_zero() -> None:
    m, h = mean_ci([4.0])
    assert m == 4.0 and math.isnan(h)
    assert all(math.isnan(v) for v in mean_ci([]))
    assert all(math.isnan(v) for v in mean_ci([math.nan, None]))
    assert math.isnan(half_width([4.0]))


def test_mean_ci_rejects_a_level_outside_the_unit_interval() -> None:
    with pytest.raises(ValueError, match="confidence"):
        mean_ci([1.0, 2.0], confidence=95)


def test_mean_ci_text() -> None:
    h = 4.302653 / math.sqrt(3)  # 2.484
    assert mean_ci_text([1.0, 2.0, 3.0]) == f"2.000 ± {h:.3f}"
    assert mean_ci_text([1.0, 2.0, 3.0], digits=1) == f"2.0 ± {h:.1f}"
    assert mean_ci_text([]) == "-"
    assert mean_ci_text([2.0]) == "2.000 ± nan"


def test_mean_sd_matches_numpy() -> None:
    x = [3.0, 5.0, 4.0, 8.0]
    m, sd = mean_sd(x)
    assert m == pytest.approx(np.mean(x)) and sd == pytest.approx(np.std(x, ddof=1))
    assert mean_sd([7.0]) == (7.0, 0.0)
    with pytest.raises(ValueError, match="no values"):
        mean_sd([])


def test_paired_ratios_pair_on_common_keys_in_order() -> None:
    a = {2: 6.0, 0: 2.0, 1: 3.0, 9: 1.0}
    b = {0: 1.0, 1: 2.0, 2: 4.0, 5: 1.0}
    assert paired_ratios(a, b) == [2.0, 1.5, 1.5]
    assert paired_ratios({("x", 1): 1.0}, {("x", 1): 4.0}) == [0.25]


def test_paired_ratio_ci_is_the_interval_of_the_per_seed_ratios() -> None:
    rng = np.random.default_rng(3)
    base = rng.uniform(5.0, 10.0, 8)
    other = base * rng.uniform(0.8, 1.0, 8)
    ratios = other / base
    lo, hi = sps.t.interval(0.95, 7, loc=ratios.mean(), scale=sps.sem(ratios))
    m, h = paired_ratio_ci(dict(enumerate(other)), dict(enumerate(base)))
    assert m == pytest.approx(ratios.mean(), rel=1e-12)
    assert h == pytest.approx((hi - lo) / 2, rel=1e-10)
    # pairing removes the seed-to-seed spread of the level: far tighter than the unpaired CI
    assert h < half_width(list(other)) / mean_ci(list(base))[0]


def test_paired_ratio_ci_without_common_keys() -> None:
    assert all(math.isnan(v) for v in paired_ratio_ci({0: 1.0}, {1: 1.0}))


# -- steady state: MSER-5, batch means, the paired ratio, the trend test ----------------

from scipy.signal import lfilter  # noqa: E402

from scalesched.stats import (  # noqa: E402
    batch_means,
    mser5_cut,
    paired_batch_ratio,
    trend_p_value,
    warmup_cut,
)


def _ar1(phi: float, n: int, seed: int) -> np.ndarray:
    """A stationary AR(1) series of unit innovations: its mean is 0 and the variance of its
    sample mean is about 1 / ((1 - phi)^2 n)."""
    rng = np.random.default_rng(seed)
    e = rng.normal(0.0, 1.0, n)
    e[0] /= math.sqrt(1 - phi * phi)
    return lfilter([1.0], [1.0, -phi], e)


def test_mser5_cuts_a_known_transient_and_leaves_a_flat_series_alone() -> None:
    cuts, flat = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        noise = rng.normal(0.0, 1.0, 4000)
        transient = 20.0 * np.exp(-np.arange(4000) / 200.0)  # below 1 sd after ~600
        cuts.append(mser5_cut(10.0 + noise + transient))
        flat.append(mser5_cut(10.0 + noise))
    assert all(c % 5 == 0 for c in cuts)
    assert min(cuts) >= 400 and max(cuts) <= 1500  # past the transient, far from the end
    assert np.median(flat) < 400  # a flat series loses little


def test_mser5_on_a_series_still_falling_cuts_in_its_second_half() -> None:
    y = 100.0 - np.arange(3000) / 30.0 + np.random.default_rng(0).normal(0, 1, 3000)
    assert mser5_cut(y) > 1500


def test_warmup_cut_finds_a_slow_rise_in_noisy_responses_that_mser5_misses() -> None:
    """A deployment filling up: responses spread as widely as their mean (exponential),
    rising by 8 s over the first 6000 of 20,000 workflows. MSER-5 sees no transient; the
    coarse pass cuts most of it, and a flat series loses little."""
    found, fine, flat = [], [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        noise = rng.exponential(30.0, 20_000)
        rise = 8.0 * np.minimum(np.arange(20_000) / 6000.0, 1.0)
        fine.append(mser5_cut(noise + rise))
        found.append(warmup_cut(noise + rise))
        flat.append(warmup_cut(noise))
    assert max(fine) < 100
    assert min(found) >= 1000 and np.median(found) >= 2500
    assert max(flat) <= 1000 and np.median(flat) < 100


def test_batch_means_covers_the_mean_of_an_ar1_series() -> None:
    phi, n = 0.9, 5000
    expected_half = 1.96 / ((1 - phi) * math.sqrt(n))
    covered, halves = 0, []
    for seed in range(200):
        bm = batch_means(_ar1(phi, n, seed))
        covered += abs(bm.mean) <= bm.half_width
        halves.append(bm.half_width)
        assert bm.batches >= 10 and bm.batch_size * bm.batches <= n
    assert 0.88 <= covered / 200 <= 0.99  # a nominal 95% interval, batches grown
    assert 0.7 < np.median(halves) / expected_half < 1.3
    # Ignoring the correlation (batches of one) would give a far too narrow interval.
    naive = 1.96 * np.std(_ar1(phi, n, 0)) / math.sqrt(n)
    assert naive < 0.5 * expected_half


def test_paired_ratio_recovers_a_known_ratio_and_pairing_narrows_it() -> None:
    pairs = []
    for seed in range(3):
        base = 10.0 + np.abs(_ar1(0.5, 4000, seed)) * 5.0
        noise = np.random.default_rng(100 + seed).normal(0.0, 0.2, base.size)
        pairs.append((1.05 * base + noise, base))
    ci = paired_batch_ratio(pairs)
    assert abs(ci.ratio - 1.05) <= ci.half_width < 0.01
    assert ci.runs == 3 and "paired batch means" in ci.method
    unpaired = batch_means(pairs[0][0]).half_width / pairs[0][1].mean()
    assert ci.half_width < unpaired / 3


def test_trend_test_sees_drift_both_ways_and_rarely_a_flat_series() -> None:
    x = np.arange(100, dtype=float)
    rng = np.random.default_rng(0)
    assert trend_p_value(10 + 0.02 * x + rng.normal(0, 0.3, 100)) < 0.01
    assert trend_p_value(10 - 0.02 * x + rng.normal(0, 0.3, 100)) < 0.01
    false_alarms = sum(
        trend_p_value(np.random.default_rng(s).normal(10, 1, 100)) < 0.01 for s in range(300)
    )
    assert false_alarms <= 9  # 1% nominal: 3 expected


def _white_and_slow(seed: int, n: int = 4000) -> np.ndarray:
    """Stationary: large white noise plus a small component correlated over ~500
    observations, the shape of a loaded queue's responses (each workflow's own work, and
    the queue following the arrivals' slow swings). Batches of ~20 look uncorrelated at lag
    1, yet drift over hundreds of observations."""
    rng = np.random.default_rng(seed)
    phi = 0.998
    slow = lfilter([1.0], [1.0, -phi], rng.normal(0.0, math.sqrt(1 - phi * phi), n))
    return 20.0 + 5.0 * rng.normal(0.0, 1.0, n) + 0.4 * slow


def test_batch_means_use_at_most_max_batches_and_the_drift_test_few_false_alarms() -> None:
    from scalesched.stats import MAX_BATCHES, MIN_BATCHES

    alarms = 0
    for seed in range(300):
        bm = batch_means(_white_and_slow(seed))
        assert MIN_BATCHES <= bm.batches <= MAX_BATCHES
        alarms += trend_p_value(bm.means) < 0.01
    # Over the 200 batches the lag-1 test accepts here, the drift test fires on 14% of
    # these stationary series; over at most 20 batches, on 7% (1% nominal: the slow part
    # is, within 4000 observations, partly a real drift of the sample).
    assert alarms / 300 <= 0.10
