"""The headroom chart: each policy's mean response as a stacked bar (the contention-free
bound, then the parts of its gap), with the capacity-aware bound and the oracles' means as
lines across."""

from __future__ import annotations

from pathlib import Path

from scalesched.eval.headroom.decompose import COMPONENTS
from scalesched.eval.headroom.study import Headroom, offered_label

_COLOURS = {
    "slower_server": "#d62728",
    "admission_wait": "#ff7f0e",
    "batching": "#bcbd22",
    "model_load": "#9467bd",
    "transfer": "#17becf",
    "tool_queue": "#8c564b",
    "cache_miss": "#e377c2",
}


def plot_headroom(study: Headroom, path: Path) -> None:
    """Write the chart (any format matplotlib writes, by suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = study.rows
    names = [r.name + (" *" if r.name == study.best_heuristic else "") for r in rows]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(rows) + 5), 4.8))
    xs = range(len(rows))
    # the bar starts at each policy's realised-path bound (bound + path, path <= 0)
    base = [r.decomposition.mean_bound + r.decomposition.components["path"] for r in rows]
    ax.bar(xs, base, color="#c7c7c7", label="contention-free bound (realised path)")
    bottom = list(base)
    for name in COMPONENTS:
        if name == "path":
            continue
        heights = [max(0.0, r.decomposition.components[name]) for r in rows]
        if not any(heights):
            continue
        ax.bar(xs, heights, bottom=bottom, color=_COLOURS[name], label=name.replace("_", " "))
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.axhline(study.lower_bound_s, color="black", linestyle=":", label="contention-free bound")
    if study.capacity.mean_s is not None:
        ax.axhline(study.bound_s, color="black", linestyle="--", label="capacity-aware bound")
    for r in rows:
        if r.oracle:
            ax.axhline(r.mean_s, color="#2ca02c", linestyle="-.", label=f"{r.name} mean")
    ax.set_xticks(list(xs), names, rotation=30, ha="right")
    ax.set_ylabel("mean response time (s)")
    s = study.setting
    offered = offered_label(s)
    ax.set_title(f"headroom: {s['cluster']}, {s['workload']}, {offered}, seed {s['seed']}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
