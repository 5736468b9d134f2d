"""The Gantt chart of a static schedule, drawn by the simulator's ``plot_gantt``."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from pathlib import Path

from scalesched.static.schedule import Schedule

_SUFFIX = re.compile(r"_(?:ID)?\d+$")
MAX_LABELS = 10


def task_label(name: Hashable) -> str:
    """A task's kind from its name: WfCommons ids ``mProject_00000001`` give ``mProject``."""
    text = str(name)
    return _SUFFIX.sub("", text) or text


def plot_schedule(
    schedule: Schedule, nodes: Sequence[Hashable], path: Path, *, title: str = ""
) -> None:
    """One row per node, one bar per task; coloured by task kind when there are at most
    ten kinds (WfCommons categories), else in one colour."""
    from scalesched.kernel.records import TaskRecord
    from scalesched.sim.trace import plot_gantt

    row = {n: k for k, n in enumerate(nodes)}
    labels = {t.name: task_label(t.name) for t in schedule}
    if len(set(labels.values())) > MAX_LABELS:
        labels = dict.fromkeys(labels, "task")
    records = [
        TaskRecord(
            0, str(t.name), "tool", labels[t.name], row[t.node], t.start, t.start, t.start, t.end
        )
        for t in schedule
    ]
    plot_gantt(records, [str(n) for n in nodes], path, title=title or schedule.policy)
