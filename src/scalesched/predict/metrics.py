"""Scores of a quantile forecast against what happened.

* ``coverage_80`` / ``coverage_90``: share of truths inside [q0.1, q0.9] / [q0.05, q0.95]
  (a calibrated forecast gets 0.8 / 0.9).
* ``pinball_loss``: mean over samples and the levels of ``QUANTILES`` of the pinball
  (quantile) loss, in the truth's unit (seconds or tokens); lower is better.
* ``crps``: the continuous ranked probability score, approximated as twice the mean pinball
  loss over 100 evenly spaced levels (0.005 .. 0.995) of the quantile function, read off the
  predicted quantiles by linear interpolation of ln(quantile) between levels and held
  constant beyond the outermost ones. For a point forecast it is the absolute error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scalesched.predict.model import QUANTILES, QuantilePredictor

if TYPE_CHECKING:
    from scalesched.predict.samples import Samples

GRID = (np.arange(100) + 0.5) / 100
_LEVELS = np.array(QUANTILES)


def pinball(y: np.ndarray, q: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """(n, k) pinball loss of quantiles ``q`` at ``levels`` for truths ``y``."""
    diff = y[:, None] - q
    return np.maximum(levels * diff, (levels - 1.0) * diff)


def on_grid(q: np.ndarray, grid: np.ndarray = GRID) -> np.ndarray:
    """(n, len(grid)) the quantile function at ``grid`` levels, from the (n, Q) quantiles:
    log-linear between the predicted levels, flat beyond."""
    logq = np.log(np.maximum(q, 1e-12))
    j = np.clip(np.searchsorted(_LEVELS, grid) - 1, 0, len(_LEVELS) - 2)
    lo, hi = _LEVELS[j], _LEVELS[j + 1]
    w = np.clip((grid - lo) / (hi - lo), 0.0, 1.0)
    return np.exp(logq[:, j] * (1.0 - w) + logq[:, j + 1] * w)


def predicted_mean(q: np.ndarray) -> np.ndarray:
    """(n,) mean of the forecast distribution (the quantile function averaged over levels)."""
    return on_grid(q).mean(axis=1)


def scores(y: np.ndarray, q: np.ndarray) -> dict[str, float]:
    """The four scores of forecasts ``q`` (n, Q) for truths ``y`` (n,)."""
    if y.size == 0:
        return {
            "coverage_80": float("nan"),
            "coverage_90": float("nan"),
            "pinball_loss": float("nan"),
            "crps": float("nan"),
        }
    col = {lv: i for i, lv in enumerate(QUANTILES)}
    cov80 = (y >= q[:, col[0.1]]) & (y <= q[:, col[0.9]])
    cov90 = (y >= q[:, col[0.05]]) & (y <= q[:, col[0.95]])
    return {
        "coverage_80": float(cov80.mean()),
        "coverage_90": float(cov90.mean()),
        "pinball_loss": float(pinball(y, q, _LEVELS).mean()),
        "crps": float(2.0 * pinball(y, on_grid(q), GRID).mean()),
    }


def calibration(y: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The levels of ``QUANTILES`` and, per level, the share of truths ``y`` (n,) at or
    below the forecast's quantile at that level ``q`` (n, Q): a calibrated forecast's
    shares equal its levels (the calibration plot's points). NaN shares when ``y`` is
    empty."""
    if q.ndim != 2 or q.shape != (y.size, len(QUANTILES)):
        raise ValueError(f"need q of shape ({y.size}, {len(QUANTILES)}), got {q.shape}")
    if y.size == 0:
        return _LEVELS.copy(), np.full(len(QUANTILES), np.nan)
    return _LEVELS.copy(), (y[:, None] <= q).mean(axis=0)


def evaluate(predictor: QuantilePredictor, samples: Samples) -> dict[str, dict[str, Any]]:
    """Scores per head (``duration``, ``finish``, ``tokens``) for the model, the static
    per-role spread (``static_role``) and the static estimate as a point forecast
    (``static_point``), and the calibration table of the first two (``calibration``:
    ``levels`` and the observed share below each level's quantile, per forecast)."""
    out: dict[str, dict[str, Any]] = {}
    heads = (
        (
            "duration",
            predictor.duration,
            predictor.static_duration,
            samples.dur_x,
            samples.dur_base,
            samples.dur_y,
            samples.dur_group,
        ),
        (
            "finish",
            predictor.finish,
            predictor.static_finish,
            samples.dur_x,
            samples.fin_base,
            samples.fin_y,
            samples.dur_group,
        ),
        (
            "tokens",
            predictor.tokens,
            predictor.static_tokens,
            samples.tok_x,
            samples.tok_base,
            samples.tok_y,
            samples.tok_group,
        ),
    )
    for name, head, static, x, base, y, group in heads:
        if y.size == 0:
            continue
        model_q = np.exp(head(x) + base[:, None])
        static_q = np.exp(static[group] + base[:, None])
        point_q = np.repeat(np.exp(base)[:, None], len(QUANTILES), axis=1)
        out[name] = {
            "model": scores(y, model_q),
            "static_role": scores(y, static_q),
            "static_point": scores(y, point_q),
            "samples": {"n": float(y.size)},
            "calibration": {
                "levels": list(QUANTILES),
                "model": calibration(y, model_q)[1].tolist(),
                "static_role": calibration(y, static_q)[1].tolist(),
            },
        }
    return out
