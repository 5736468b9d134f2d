"""A picture of a replayed plan: the five streams' operations over time, and memory in use."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scalesched.memplan.replay import ReplayResult  # noqa: E402

_COLOURS = {
    "fwd": "#4c72b0",
    "bwd": "#55a868",
    "recompute": "#c44e52",
    "adam": "#8172b2",
    "offload": "#dd8452",
    "write": "#dd8452",
    "prefetch": "#937860",
    "read": "#937860",
    "grads": "#da8bc3",
    "weights": "#8c8c8c",
    "load": "#8c8c8c",
    "lm": "#ccb974",
    "embedding": "#64b5cd",
}
_ROWS = ("compute", "h2d", "d2h", "nvme", "cpu")


def plot_timeline(
    result: ReplayResult, path: Path, *, title: str, caps_gb: dict[str, float]
) -> None:
    fig, (ax, axm) = plt.subplots(
        2, 1, figsize=(12, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    for op in result.ops:
        if op.end <= op.start:
            continue
        row = _ROWS.index(op.stream)
        colour = _COLOURS.get(op.name.split()[0], "#333333")
        ax.barh(row, op.end - op.start, left=op.start, color=colour, edgecolor="none", height=0.8)
    ax.set_yticks(range(len(_ROWS)), ["GPU compute", "PCIe H2D", "PCIe D2H", "NVMe", "CPU"])
    ax.invert_yaxis()
    edges = [0.0]
    for w in result.window_s:
        edges.append(edges[-1] + w)
    for x in edges:
        ax.axvline(x, color="#dddddd", linewidth=0.4, zorder=0)
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=_COLOURS[k])
        for k in ("fwd", "bwd", "recompute", "adam", "offload", "prefetch", "grads", "load")
    ]
    labels = ["forward", "backward", "recompute", "Adam", "offload", "prefetch", "grads", "weights"]
    ax.legend(handles, labels, ncol=8, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, 1.12))
    ax.set_title(title, fontsize=9, pad=22)
    for dev, colour in (("gpu", "#4c72b0"), ("cpu", "#dd8452"), ("nvme", "#937860")):
        trace = result.memory[dev]
        if max(v for _, v in trace) <= 0:
            continue
        xs = [t for t, _ in trace] + [result.iteration_s]
        ys = [v / 1e9 for _, v in trace] + [trace[-1][1] / 1e9]
        axm.step(xs, ys, where="post", color=colour, label=f"{dev.upper()} in use")
        if dev == "gpu":
            axm.axhline(caps_gb[dev], color=colour, linestyle="--", linewidth=0.8, label="GPU cap")
    axm.set_ylabel("GB")
    axm.set_xlabel("time in the iteration (s)")
    axm.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
