"""Per-task trace export (JSON lines) and a Gantt chart of a run.

Neither creates folders: an output path whose folder is missing is an error
(:func:`check_output_file`), so a typo in a path never leaves a stray folder behind.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from scalesched.errors import InputError, check_output_path
from scalesched.kernel.records import TaskRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TRACE_FIELDS = ("workflow", "task", "kind", "model", "server", "ready", "landed", "start", "end")


def check_output_file(path: Path, option: str) -> None:
    """Fail before a run, naming ``option``, when ``path`` cannot be written as a file
    (:func:`scalesched.errors.check_output_path`, the one check every output shares)."""
    check_output_path(path, option, "file")


def check_gantt_file(path: Path, option: str = "--gantt") -> None:
    """:func:`check_output_file`, and the suffix must be an image format matplotlib writes."""
    check_output_path(path, option, "image")


def write_trace(
    records: Sequence[TaskRecord], server_names: Sequence[str], path: Path, option: str = "--trace"
) -> None:
    """One JSON object per task: workflow, task, server (name), ready/landed/start/end (s)."""
    with TraceWriter(path, server_names, option) as write:
        for r in records:
            write(r)


class TraceWriter:
    """The trace file of :func:`write_trace`, written a row at a time as tasks finish (a
    streamed run's ``trace_sink``), so a long run never holds its records."""

    def __init__(self, path: Path, server_names: Sequence[str], option: str = "--trace"):
        self.path, self.option = path, option
        self._names = list(server_names)
        self._fh: IO[str] | None = None

    def __enter__(self) -> TraceWriter:
        try:
            self._fh = self.path.open("w", encoding="utf-8")
        except OSError as exc:
            raise self._error(exc) from None
        return self

    def __call__(self, r: TaskRecord) -> None:
        assert self._fh is not None, "use TraceWriter as a context manager"
        row = {f: getattr(r, f) for f in TRACE_FIELDS}
        row["server"] = self._names[r.server]
        try:
            self._fh.write(json.dumps(row, allow_nan=False) + "\n")
        except OSError as exc:
            raise self._error(exc) from None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError as err:
                if kind is None:
                    raise self._error(err) from None
            self._fh = None

    def _error(self, exc: OSError) -> InputError:
        return InputError(
            self.option, self.option.lstrip("-"), f"cannot write {self.path}: {exc.strerror}"
        )


MAX_LANES = 8
MAX_NAMED = 6
"""Idle servers named under a Gantt chart; the rest are counted."""
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


def _left_out(
    records: Sequence[TaskRecord], server_names: Sequence[str], used: list[int], max_servers: int
) -> list[str]:
    """What the chart leaves out, in words: idle servers (named, up to ``MAX_NAMED``) and
    busy servers past ``max_servers``."""
    busy = {r.server for r in records}
    dropped = []
    idle = [name for i, name in enumerate(server_names) if i not in busy]
    if idle:
        names = ", ".join(idle[:MAX_NAMED]) + (
            f" and {len(idle) - MAX_NAMED} more" * (len(idle) > MAX_NAMED)
        )
        dropped.append(f"idle, not shown: {names}")
    if len(busy) > len(used):
        dropped.append(
            f"{len(busy) - len(used)} busy servers past the first {max_servers} not shown"
        )
    return dropped


def _draw_bars(
    ax: Axes, records: Sequence[TaskRecord], used: list[int], colour: dict[str, Any]
) -> None:
    """One bar per task on its server's row, in the lane ``_lanes`` gives it; drawn as one
    collection of rectangles per colour (a patch per task took about 1 s per 1000 tasks to
    add and draw: 25 s for a 1500-workflow run)."""
    from matplotlib.collections import PolyCollection

    row_of = {s: i for i, s in enumerate(used)}
    lanes = _lanes(records, set(used))
    n_lanes = {s: max((lane for _, lane in items), default=0) + 1 for s, items in lanes.items()}
    boxes: dict[str, list[list[tuple[float, float]]]] = {}
    for server, items in lanes.items():
        height = 0.8 / n_lanes[server]
        for idx, lane in items:
            r = records[idx]
            y = row_of[server] - 0.4 + height * (lane + 0.5)
            lo, hi = y - height * 0.45, y + height * 0.45
            right = r.start + max(r.end - r.start, 1e-3)
            box = [(r.start, lo), (right, lo), (right, hi), (r.start, hi)]
            boxes.setdefault(r.model or "tool", []).append(box)
    for label, polys in boxes.items():
        ax.add_collection(
            PolyCollection(polys, facecolors=colour[label], edgecolors="none", alpha=0.8)
        )
    ax.margins(x=0.01)  # as bars had: the time axis starts near the first task
    ax.autoscale_view()


def _save(fig: Figure, path: Path, option: str) -> None:
    """Write the chart; a path that cannot be written is the option's input error."""
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    except OSError as exc:
        raise InputError(
            option, option.lstrip("-"), f"cannot write {path}: {exc.strerror}"
        ) from None
    except ValueError as exc:  # an image format matplotlib does not know, e.g. ".xyz"
        msg = " ".join(str(exc).split())[:160]
        raise InputError(option, option.lstrip("-"), f"cannot write {path}: {msg}") from None


def plot_gantt(
    records: Sequence[TaskRecord],
    server_names: Sequence[str],
    path: Path,
    *,
    title: str = "",
    max_servers: int = 48,
    option: str = "--gantt",
) -> None:
    """One row per server, one bar per task (start to end), coloured by model or tool.

    Tasks that overlap on a server (a batch of LLM requests, tools on several cores) are
    stacked in thin lanes inside the server's row, up to ``MAX_LANES``. Servers that ran
    nothing get no row, and the chart says how many were left out (and how many busy
    servers past ``max_servers``).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    used = sorted({r.server for r in records})[:max_servers]
    dropped = _left_out(records, server_names, used, max_servers)
    labels = sorted({r.model or "tool" for r in records})
    cmap = plt.get_cmap("tab10")
    colour = {label: cmap(i % 10) for i, label in enumerate(labels)}
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.28 * len(used) + 1.5)))
    _draw_bars(ax, records, used, colour)
    ax.set_yticks(range(len(used)))
    ax.set_yticklabels([server_names[s] for s in used], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_ylabel("server")
    ax.set_title(title or "task placement over time")
    if dropped:  # under the x-axis label, whatever the chart's height
        ax.annotate(
            "; ".join(dropped),
            xy=(1.0, 0.0),
            xycoords="axes fraction",
            xytext=(0, -34),
            textcoords="offset points",
            ha="right",
            va="top",
            fontsize=7,
        )
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour[label], alpha=0.6) for label in labels]
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.tight_layout()
    try:
        _save(fig, path, option)
    finally:
        plt.close(fig)
