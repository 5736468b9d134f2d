"""Per-task trace export (JSON lines) and a Gantt chart of a run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from scalesched.sim.engine import TaskRecord

TRACE_FIELDS = ("workflow", "task", "kind", "model", "server", "ready", "landed", "start", "end")


def write_trace(records: Sequence[TaskRecord], server_names: Sequence[str], path: Path) -> None:
    """One JSON object per task: workflow, task, server (name), ready/landed/start/end (s)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in records:
            row = {f: getattr(r, f) for f in TRACE_FIELDS}
            row["server"] = server_names[r.server]
            fh.write(json.dumps(row) + "\n")


def plot_gantt(
    records: Sequence[TaskRecord],
    server_names: Sequence[str],
    path: Path,
    *,
    title: str = "",
    max_servers: int = 48,
) -> None:
    """One row per server, one bar per task (start to end), coloured by model or tool."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    used = sorted({r.server for r in records})[:max_servers]
    row_of = {s: i for i, s in enumerate(used)}
    labels = sorted({r.model or "tool" for r in records})
    cmap = plt.get_cmap("tab10")
    colour = {label: cmap(i % 10) for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.28 * len(used) + 1.5)))
    for r in records:
        row = row_of.get(r.server)
        if row is None:
            continue
        width = max(r.end - r.start, 1e-3)
        ax.barh(
            row,
            width,
            left=r.start,
            height=0.8,
            color=colour[r.model or "tool"],
            edgecolor="none",
            alpha=0.6,
        )
    ax.set_yticks(range(len(used)))
    ax.set_yticklabels([server_names[s] for s in used], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title or "task placement over time")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[label], alpha=0.6) for label in labels]
    ax.legend(handles, labels, loc="upper right", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
