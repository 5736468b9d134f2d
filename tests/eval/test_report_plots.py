"""The study's figures are readable at a glance: few lines, distinct colours, ticks at the
measured N, plain log labels, legends outside the data, labelled axes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from scalesched.eval import report  # noqa: E402
from scalesched.eval.study import STATUS_OK  # noqa: E402

SIZES = (16, 32, 48, 64, 96, 128)
LEARNED = ("scale", "scale-nosrr", "scale-ssm", "mlp-16")
HEURISTICS = ("eft", "heft_online", "least_loaded", "kv_aware", "p2c", "round_robin", "random")
SPEED = {"eft": 1.0, "heft_online": 1.01, "least_loaded": 1.3, "kv_aware": 1.1, "p2c": 1.2}


def rows() -> list[dict[str, Any]]:
    out = []
    for n in SIZES:
        for seed in range(3):
            for k, p in enumerate((*LEARNED, *HEURISTICS)):
                if p == "mlp-16" and n != 16:
                    continue
                rt = 40.0 * SPEED.get(p, 1.5 + 0.1 * k) * (1 + 0.01 * seed) * (16 / n) ** 0.3
                out.append(
                    {
                        "policy": p,
                        "n_servers": n,
                        "seed": seed,
                        "status": STATUS_OK,
                        "avg_response_time_s": rt,
                        "p95_response_time_s": 2 * rt,
                        "lower_bound_ratio": rt / 20,
                        "steady_state": True,
                        **(
                            {
                                "feature_mean": 0.01 * n,
                                "feature_var": 1.0,
                                "feature_offdiag_corr": 0.1,
                            }
                            if p.startswith("scale")
                            else {}
                        ),
                    }
                )
    return out


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return report.summarise(rows(), [*LEARNED, *HEURISTICS])


def test_the_main_figure_shows_the_learned_policies_against_the_best_heuristic(
    summary: dict[str, Any],
) -> None:
    assert report.best_heuristic_overall(summary) == "eft"
    shown = report.default_plot_policies(summary)
    assert shown == [*LEARNED, "eft"]
    fig = report.response_time_figure(summary, shown)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == shown
    colours = [to_rgb(line.get_color()) for line in ax.get_lines()]
    for i, a in enumerate(colours):  # clearly distinct: far apart in RGB
        for b in colours[i + 1 :]:
            assert sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) ** 0.5 > 0.25, (a, b)
    plt.close(fig)


def test_axes_ticks_and_legend(summary: dict[str, Any]) -> None:
    fig = report.response_time_figure(summary, summary["policies"])
    ax = fig.axes[0]
    fig.canvas.draw()
    assert list(ax.get_xticks()) == list(SIZES)
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in SIZES]
    ylabels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert ylabels and all("^" not in t and "times" not in t for t in ylabels), ylabels
    assert all(float(t) > 0 for t in ylabels)  # plain numbers: 10, 20, 50
    assert ax.get_xlabel() == "servers N" and ax.get_ylabel() == "mean response time (s)"
    legend = ax.get_legend().get_window_extent()
    assert legend.x0 >= ax.get_window_extent().x1  # outside the data
    lines = ax.get_lines()
    assert len({line.get_color() for line in lines}) == len(lines) == len(summary["policies"])
    assert {line.get_linestyle() for line in lines if line.get_label() in HEURISTICS} == {"--"}
    assert {line.get_linestyle() for line in lines if line.get_label() in LEARNED} == {"-"}
    plt.close(fig)


def test_attention_feature_figure_has_y_labels_and_measured_ticks() -> None:
    fig = report.attention_feature_figure(rows())
    assert fig is not None
    assert len(fig.axes) == 3
    for ax in fig.axes:
        assert ax.get_ylabel() and ax.get_xlabel() == "servers N"
        assert list(ax.get_xticks()) == list(SIZES)
    # mlp-16 runs at one N only: no drift to show
    assert {line.get_label() for line in fig.axes[0].get_lines()} == {
        "scale",
        "scale-nosrr",
        "scale-ssm",
    }
    plt.close(fig)


def test_plot_all_writes_the_main_and_the_full_figure(
    summary: dict[str, Any], tmp_path: Path
) -> None:
    names = {p.name for p in report.plot_all(rows(), summary, tmp_path)}
    assert names == {
        "response_time_vs_n.png",
        "response_time_vs_n_all.png",
        "srr_gain_vs_n.png",  # scale and scale-nosrr were both run
        "attention_feature_vs_n.png",
    }
    only = report.plot_all(rows(), summary, tmp_path / ".", policies=["eft", "random"])
    assert "response_time_vs_n.png" in {p.name for p in only}


def test_json_ready_turns_undefined_figures_into_null() -> None:
    data = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": "x", "e": 2}
    assert report.json_ready(data) == {"a": None, "b": [1.0, None, {"c": None}], "d": "x", "e": 2}


def test_a_one_seed_summary_is_strict_json() -> None:
    """A confidence interval from one seed is undefined: null in summary.json and --json."""
    import json

    one_seed = [r for r in rows() if r["seed"] == 0]
    summary = report.summarise(one_seed, [*LEARNED, *HEURISTICS])
    assert math.isnan(summary["by_n"][16]["policies"]["eft"]["mean_rt_ci"])
    text = json.dumps(report.json_ready(summary), allow_nan=False)
    assert json.loads(text)["by_n"]["16"]["policies"]["eft"]["mean_rt_ci"] is None
