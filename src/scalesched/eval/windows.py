"""One measured window for every policy compared on the same workflows.

Each run finds its own warm-up (MSER, ``scalesched.kernel.metrics``), but policies that
ran the same seed's workflows (common random numbers) are compared over the same ones: the
largest cut among the runs that reached steady state (``runs.windows.shared_warmup_cut``),
so that no settled policy's cold start is measured and every pair of runs covers the same
workflows. The response figures of each run are recomputed over the shared window; each run
keeps its own steady-state verdict (a verdict is about the run).

Paired comparisons then pair the two runs' responses workflow by workflow
(``scalesched.stats.paired_batch_ratio``): paired batch means within a run, pooled over
seeds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from scalesched.kernel.metrics import any_deployment_figures, response_figures
from scalesched.runs.windows import shared_warmup_cut
from scalesched.stats import RatioCI, batch_means, paired_batch_ratio

SERIES = "_series"
"""Row key: the run's responses before the run-out, in arrival order (not in results.csv)."""
BOUNDS = "_lower_bounds"
ANY_BOUNDS = "_any_deployment_bounds"
"""Row key: the series' world-independent bounds (``any_deployment_figures``)."""
SHARED_CUT = "shared_warmup_workflows"


def share_windows(rows: Sequence[dict[str, Any]]) -> None:
    """Give the runs of each (size, seed) the largest warm-up cut among its steady runs (among
    all, where none is steady) and recompute their response figures over it, in place. Rows
    without a series are left alone."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if SERIES in r and "warmup_workflows" in r:
            groups[(int(r["n_servers"]), int(r["seed"]))].append(r)
    for group in groups.values():
        cut = shared_warmup_cut(
            (int(r["warmup_workflows"]), bool(r.get("steady_state"))) for r in group
        )
        for r in group:
            _measure_from(r, cut)


def _measure_from(row: dict[str, Any], cut: int) -> None:
    series, bounds = np.asarray(row[SERIES]), np.asarray(row[BOUNDS])
    kept, lb = series[cut:], bounds[cut:]
    done = np.isfinite(kept)
    rt, lb = kept[done], lb[done]
    row[SHARED_CUT] = cut
    if not rt.size:
        return
    bm = batch_means(rt)
    figures = response_figures(rt, lb)
    row.update(
        measured_workflows=int(rt.size),
        **figures,
        avg_response_time_ci_s=bm.half_width if math.isfinite(bm.half_width) else -1.0,
        ci_method=bm.method,
    )
    if ANY_BOUNDS in row and np.asarray(row[ANY_BOUNDS]).size == series.size:
        row.update(any_deployment_figures(figures, np.asarray(row[ANY_BOUNDS])[cut:][done]))


def paired_ratio_rows(
    rows: Sequence[dict[str, Any]], policy: str, baseline: str, n: int
) -> RatioCI | None:
    """``policy`` over ``baseline`` at size ``n``: paired batch means over the seeds both
    ran, on the shared window; None when the rows carry no series (read back from a
    results file), so the caller falls back to seed-paired replications."""
    pairs = paired_series(rows, policy, baseline, n)
    return None if pairs is None else paired_batch_ratio(pairs)


def paired_series(
    rows: Sequence[dict[str, Any]], policy: str, baseline: str, n: int
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Per seed both ran at size ``n``: the two runs' responses over their shared window,
    workflow by workflow (None without series)."""
    by_seed: dict[str, dict[int, dict[str, Any]]] = {policy: {}, baseline: {}}
    for r in rows:
        if r["n_servers"] == n and r["policy"] in by_seed and r.get("status") == "ok":
            by_seed[r["policy"]][int(r["seed"])] = r
    seeds = sorted(set(by_seed[policy]) & set(by_seed[baseline]))
    if not seeds or any(SERIES not in by_seed[p][s] for p in by_seed for s in seeds):
        return None
    pairs = []
    for s in seeds:
        a, b = by_seed[policy][s], by_seed[baseline][s]
        cut = max(int(a.get(SHARED_CUT, 0)), int(b.get(SHARED_CUT, 0)))
        x, y = np.asarray(a[SERIES])[cut:], np.asarray(b[SERIES])[cut:]
        both = np.isfinite(x) & np.isfinite(y)
        pairs.append((x[both], y[both]))
    return pairs
