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


MAX_LANES = 8
"""Overlapping tasks on one server are drawn in at most this many lanes."""


def _lanes(records: Sequence[TaskRecord], servers: set[int]) -> dict[int, list[tuple[int, int]]]:
    """Per server, (record index, lane): greedy interval colouring, first lane free at the
    task's start; past MAX_LANES a task shares the lane that frees up first."""
    out: dict[int, list[tuple[int, int]]] = {s: [] for s in servers}
    ends: dict[int, list[float]] = {s: [] for s in servers}
    order = sorted(
        (i for i, r in enumerate(records) if r.server in servers), key=lambda i: records[i].start
    )
    for i in order:
        r = records[i]
        lane_ends = ends[r.server]
        lane = next((k for k, e in enumerate(lane_ends) if e <= r.start), len(lane_ends))
        if lane == len(lane_ends):
            if lane < MAX_LANES:
                lane_ends.append(0.0)
            else:
                lane = min(range(MAX_LANES), key=lane_ends.__getitem__)
        lane_ends[lane] = max(lane_ends[lane], r.end)
        out[r.server].append((i, lane))
    return out


def plot_gantt(
    records: Sequence[TaskRecord],
    server_names: Sequence[str],
    path: Path,
    *,
    title: str = "",
    max_servers: int = 48,
) -> None:
    """One row per server, one bar per task (start to end), coloured by model or tool.

    Tasks that overlap on a server (a batch of LLM requests, tools on several cores) are
    stacked in thin lanes inside the server's row, up to ``MAX_LANES``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    used = sorted({r.server for r in records})[:max_servers]
    row_of = {s: i for i, s in enumerate(used)}
    labels = sorted({r.model or "tool" for r in records})
    cmap = plt.get_cmap("tab10")
    colour = {label: cmap(i % 10) for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.28 * len(used) + 1.5)))
    lanes = _lanes(records, set(used))
    n_lanes = {s: max((lane for _, lane in items), default=0) + 1 for s, items in lanes.items()}
    for server, items in lanes.items():
        height = 0.8 / n_lanes[server]
        for idx, lane in items:
            r = records[idx]
            ax.barh(
                row_of[server] - 0.4 + height * (lane + 0.5),
                max(r.end - r.start, 1e-3),
                left=r.start,
                height=height * 0.9,
                color=colour[r.model or "tool"],
                edgecolor="none",
                alpha=0.8,
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
