"""Forecast scores: calibrated forecasts cover at their level, point forecasts score MAE."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from scalesched.predict.metrics import calibration, on_grid, scores
from scalesched.predict.model import QUANTILES


def test_calibrated_forecast_covers_at_its_level() -> None:
    rng = np.random.default_rng(0)
    y = np.exp(rng.normal(size=20_000))
    q = np.tile(np.exp(norm.ppf(QUANTILES)), (y.size, 1))
    s = scores(y, q)
    assert abs(s["coverage_80"] - 0.8) < 0.015
    assert abs(s["coverage_90"] - 0.9) < 0.015


def test_sharper_right_forecast_scores_better() -> None:
    """Knowing half of the noise beats the marginal on pinball and CRPS."""
    rng = np.random.default_rng(1)
    known, unknown = rng.normal(size=5000), rng.normal(size=5000)
    y = np.exp(known + unknown)
    marginal = np.tile(np.exp(np.sqrt(2) * norm.ppf(QUANTILES)), (y.size, 1))
    informed = np.exp(known[:, None] + norm.ppf(QUANTILES)[None, :])
    a, b = scores(y, marginal), scores(y, informed)
    assert b["pinball_loss"] < 0.9 * a["pinball_loss"]
    assert b["crps"] < 0.9 * a["crps"]


def test_point_forecast_crps_is_absolute_error() -> None:
    y = np.array([1.0, 4.0, 9.0])
    q = np.full((3, len(QUANTILES)), 4.0)
    assert np.isclose(scores(y, q)["crps"], np.mean(np.abs(y - 4.0)))
    assert scores(y, q)["coverage_90"] == 1 / 3


def test_grid_interpolates_between_levels() -> None:
    q = np.exp(np.array([QUANTILES]))
    g = on_grid(q, np.array([0.5, 0.01, 0.999]))
    np.testing.assert_allclose(g[0], np.exp([0.5, 0.05, 0.99]))


def test_calibration_table_of_a_calibrated_forecast_is_the_diagonal() -> None:
    rng = np.random.default_rng(2)
    y = np.exp(rng.normal(size=40_000))
    q = np.tile(np.exp(norm.ppf(QUANTILES)), (y.size, 1))
    levels, observed = calibration(y, q)
    np.testing.assert_array_equal(levels, QUANTILES)
    np.testing.assert_allclose(observed, QUANTILES, atol=0.01)


def test_calibration_table_of_an_overconfident_forecast() -> None:
    """Truth N(0, 1), forecast N(0, 0.5): the level-p quantile 0.5 z_p has share Phi(0.5 z_p)
    below it, too high below the median and too low above it."""
    rng = np.random.default_rng(3)
    y = rng.normal(size=40_000)
    q = np.tile(0.5 * norm.ppf(QUANTILES), (y.size, 1))
    _, observed = calibration(y, q)
    expected = norm.cdf(0.5 * norm.ppf(QUANTILES))
    np.testing.assert_allclose(observed, expected, atol=0.01)
    assert observed[0] > 0.15 and observed[-1] < 0.9  # far off the diagonal at the ends


def test_calibration_table_counts_exactly() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    q = np.tile(np.array(QUANTILES) * 4, (4, 1))  # 0.2, 0.4, 1.0, 2.0, 3.0, 3.2, 3.6, 3.8, 3.96
    _, observed = calibration(y, q)
    np.testing.assert_array_equal(observed, [0, 0, 0.25, 0.5, 0.75, 0.75, 0.75, 0.75, 0.75])
    with pytest.raises(ValueError, match="shape"):
        calibration(y, q[:, :3])
    assert np.isnan(calibration(np.array([]), q[:0])[1]).all()
