"""One measured window per seed, and paired ratios over it, in a study."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.eval.windows import BOUNDS, SERIES, paired_ratio_rows, share_windows


def _row(
    policy: str, seed: int, series: np.ndarray, cut: int, steady: bool = True
) -> dict[str, object]:
    return {
        "policy": policy,
        "n_servers": 16,
        "seed": seed,
        "status": "ok",
        "steady_state": steady,
        "warmup_workflows": cut,
        SERIES: series,
        BOUNDS: np.full(series.size, 10.0),
    }


def test_policies_of_a_seed_share_the_largest_cut_and_are_paired_over_it() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for seed in range(2):
        base = 20.0 + rng.exponential(5.0, 3000)
        slow = base.copy()
        slow[:500] += 100.0  # a cold start the other policy does not have
        rows += [_row("a", seed, 1.1 * base, 100), _row("b", seed, slow, 600)]
    share_windows(rows)
    assert {r["shared_warmup_workflows"] for r in rows} == {600}
    a0 = rows[0]
    assert np.isclose(a0["avg_response_time_s"], a0[SERIES][600:].mean())
    assert a0["measured_workflows"] == 2400 and a0["lower_bound_ratio"] > 2
    ci = paired_ratio_rows(rows, "a", "b", 16)
    assert ci is not None and abs(ci.ratio - 1.1) < 1e-9  # exact: b's cold start is cut
    assert ci.runs == 2 and ci.half_width < 1e-6


def test_a_run_that_never_settled_does_not_set_the_window() -> None:
    """A queue that keeps growing gets a late MSER cut: the steady runs keep their window
    (and the unsettled one is measured over it, its verdict kept); where no run is steady,
    the largest cut is taken as before."""
    flat = 20.0 + np.random.default_rng(1).exponential(5.0, 3000)
    growing = np.linspace(20.0, 400.0, 3000)
    rows = [
        _row("a", 0, flat, 100),
        _row("b", 0, 1.2 * flat, 300),
        _row("c", 0, growing, 2700, False),
    ]
    share_windows(rows)
    assert {r["shared_warmup_workflows"] for r in rows} == {300}
    assert rows[2]["measured_workflows"] == 2700 and rows[2]["steady_state"] is False
    ci = paired_ratio_rows(rows, "b", "a", 16)
    assert ci is not None and abs(ci.ratio - 1.2) < 1e-9 and ci.runs == 1
    unsettled = [_row("a", 0, flat, 100, False), _row("c", 0, growing, 2700, False)]
    share_windows(unsettled)
    assert {r["shared_warmup_workflows"] for r in unsettled} == {2700}


def test_paired_ratio_needs_series_else_the_caller_falls_back() -> None:
    rows = [_row("a", 0, np.ones(100), 0), _row("b", 0, np.ones(100), 0)]
    del rows[0][SERIES]
    assert paired_ratio_rows(rows, "a", "b", 16) is None


def test_eval_auto_reports_the_lengths_it_tried(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "study"
    res = CliRunner().invoke(
        app,
        ["eval", "--policies", "tail,eft", "--nodes", "4", "--seeds", "1", "--workflows",
         "auto", "--precision", "0.5", "--max-workflows", "300", "--out", str(out), "--json",
         "--no-progress"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert [a["workflows"] for a in summary["workflows_auto"]] == [300]
    assert summary["config"]["workflows"] == 300 and summary["precision"] == 0.5
    text = (out / "summary.md").read_text()
    assert "--workflows auto: 300 tried" in text and "paired batch means" in text
    assert "_series" not in (out / "results.csv").read_text().splitlines()[0]


def test_the_any_deployment_figures_follow_the_shared_window() -> None:
    """A row's world-independent bound is re-measured over the shared window with its
    response figures, so its ratio is of the same workflows."""
    from scalesched.eval.windows import ANY_BOUNDS

    series = np.concatenate([np.full(100, 100.0), np.full(400, 30.0)])
    rows = [_row("a", 0, series, 0), _row("b", 0, series, 100)]
    for r in rows:
        r[ANY_BOUNDS] = np.concatenate([np.full(100, 1.0), np.full(400, 6.0)])
    share_windows(rows)
    for r in rows:
        assert r["mean_any_deployment_bound_s"] == 6.0
        assert r["any_deployment_bound_ratio"] == 5.0
