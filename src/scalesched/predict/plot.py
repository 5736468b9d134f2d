"""Calibration plots of a quantile predictor (``scalesched predict eval --plot FILE``).

One panel per head of an evaluation report (:func:`scalesched.predict.metrics.evaluate`):
the predicted quantile level against the observed share of truths at or below that
quantile, for the model and the static per-role spread, with the diagonal a calibrated
forecast lies on. Points above the diagonal mean the quantile is too high (the forecast
is too pessimistic there), below it too low. Imported only to draw: matplotlib, Agg
backend, no display needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_TITLES = {
    "duration": "duration (start to end)",
    "finish": "finish (decision to end)",
    "tokens": "output tokens",
}
_FORECASTS = (
    ("model", "model", "#4c72b0", "o"),
    ("static_role", "static per role", "#dd8452", "s"),
)


def plot_calibration(heads: dict[str, dict[str, Any]], path: Path, *, title: str) -> None:
    """Write the calibration plot of ``heads`` (``evaluate``'s per-head entries, each with a
    ``calibration`` table) to ``path``; the image type follows the suffix."""
    names = [h for h in ("duration", "finish", "tokens") if h in heads]
    if not names:
        raise ValueError("no head to plot")
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        table = heads[name]["calibration"]
        levels = table["levels"]
        ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--", label="calibrated")
        for key, label, colour, marker in _FORECASTS:
            ax.plot(levels, table[key], color=colour, marker=marker, markersize=4, label=label)
        n = int(heads[name]["samples"]["n"])
        ax.set_title(f"{_TITLES.get(name, name)}, n = {n:,}", fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_aspect("equal")
        ax.set_xlabel("predicted quantile level", fontsize=8)
        ax.grid(color="#eeeeee", linewidth=0.5)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("observed share at or below it", fontsize=8)
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
