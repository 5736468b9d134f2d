"""A static schedule: per network node, the tasks it runs with their start and end times.

Shaped like SAGA's: ``schedule.makespan``, ``schedule[node]`` (the node's tasks by start
time), ``schedule.items()``; plus ``schedule.task(name)`` and ``schedule.info`` (what made it).
:func:`validate_schedule` checks a schedule against its problem.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import networkx as nx

from scalesched.static.problem import StaticProblem, build_problem


@dataclass(frozen=True, slots=True)
class ScheduledTask:
    """One task placed on a node from ``start`` to ``end`` (seconds)."""

    node: Hashable
    name: Hashable
    start: float
    end: float


@dataclass(slots=True)
class Schedule:
    """Tasks per node, each list sorted by start time."""

    mapping: dict[Hashable, list[ScheduledTask]]
    policy: str = ""
    info: dict[str, float | str | bool] = field(default_factory=dict)
    """Extras: for simulated policies ``sim_makespan`` and ``bandwidth_exact``."""
    _by_name: dict[Hashable, ScheduledTask] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for tasks in self.mapping.values():
            tasks.sort(key=lambda t: (t.start, t.end))
        self._by_name = {t.name: t for tasks in self.mapping.values() for t in tasks}

    @classmethod
    def from_tasks(
        cls,
        nodes: Iterable[Hashable],
        tasks: Iterable[ScheduledTask],
        *,
        policy: str = "",
        info: Mapping[str, float | str | bool] | None = None,
    ) -> Schedule:
        mapping: dict[Hashable, list[ScheduledTask]] = {n: [] for n in nodes}
        for t in tasks:
            mapping[t.node].append(t)
        return cls(mapping, policy=policy, info=dict(info or {}))

    @property
    def makespan(self) -> float:
        """End of the last task (0 for an empty schedule)."""
        return max((tasks[-1].end for tasks in self.mapping.values() if tasks), default=0.0)

    def __getitem__(self, node: Hashable) -> list[ScheduledTask]:
        return self.mapping[node]

    def __len__(self) -> int:
        return len(self._by_name)

    def __iter__(self) -> Iterator[ScheduledTask]:
        for tasks in self.mapping.values():
            yield from tasks

    def items(self) -> Iterable[tuple[Hashable, list[ScheduledTask]]]:
        return self.mapping.items()

    def task(self, name: Hashable) -> ScheduledTask:
        """The placement of one task (KeyError when it is not scheduled)."""
        return self._by_name[name]

    def placement(self) -> dict[Hashable, Hashable]:
        """Task name -> node."""
        return {name: t.node for name, t in self._by_name.items()}


class ScheduleError(ValueError):
    """A schedule that breaks its problem: a missing task, a wrong duration, an overlap or
    a task that starts before its inputs can have arrived."""


def validate_schedule(
    schedule: Schedule,
    task_graph: nx.DiGraph | StaticProblem,
    network: nx.Graph | None = None,
    *,
    rel_tol: float = 1e-9,
) -> None:
    """Raise :class:`ScheduleError` unless ``schedule`` is a valid schedule of the problem.

    Checked: every task is placed exactly once on a node of the network, from ``start >=
    0`` for ``cost / speed``; no two tasks of a node overlap; every task starts after each
    parent's end plus the transfer from the parent's node (free on the same node). Times
    compare with a tolerance of ``rel_tol`` x max(1, makespan).
    """
    prob = task_graph if isinstance(task_graph, StaticProblem) else None
    if prob is None:
        if network is None:
            raise TypeError("validate_schedule needs the network with a task graph")
        prob = build_problem(task_graph, network)
    tol = rel_tol * max(1.0, schedule.makespan)
    node_pos = {n: k for k, n in enumerate(prob.nodes)}
    index = {t: i for i, t in enumerate(prob.tasks)}
    placed: dict[int, ScheduledTask] = {}
    for node, tasks in schedule.items():
        if node not in node_pos:
            raise ScheduleError(f"node {node!r} is not in the network")
        prev: ScheduledTask | None = None
        for t in sorted(tasks, key=lambda x: (x.start, x.end)):
            if t.node != node:
                raise ScheduleError(f"task {t.name!r} is listed under {node!r} but says {t.node!r}")
            i = index.get(t.name)
            if i is None:
                raise ScheduleError(f"task {t.name!r} is not in the task graph")
            if i in placed:
                raise ScheduleError(f"task {t.name!r} is scheduled twice")
            placed[i] = t
            if t.start < -tol:
                raise ScheduleError(f"task {t.name!r} starts before 0 ({t.start})")
            want = prob.exec_time(i, node_pos[node])
            if abs((t.end - t.start) - want) > tol:
                raise ScheduleError(
                    f"task {t.name!r} runs {t.end - t.start} on {node!r}, expected {want}"
                )
            if prev is not None and t.start < prev.end - tol:
                raise ScheduleError(
                    f"tasks {prev.name!r} and {t.name!r} overlap on {node!r} "
                    f"({prev.start}-{prev.end} and {t.start}-{t.end})"
                )
            prev = t
    missing = [prob.tasks[i] for i in range(prob.n_tasks) if i not in placed]
    if missing:
        raise ScheduleError(f"{len(missing)} task(s) not scheduled, e.g. {missing[0]!r}")
    for v in range(prob.n_tasks):
        tv = placed[v]
        pv = node_pos[tv.node]
        for u, size in prob.parents[v]:
            tu = placed[u]
            arrive = tu.end + prob.transfer_time(size, node_pos[tu.node], pv)
            if tv.start < arrive - tol:
                raise ScheduleError(
                    f"task {tv.name!r} starts at {tv.start} on {tv.node!r} before the data of "
                    f"{tu.name!r} arrives at {arrive}"
                )
