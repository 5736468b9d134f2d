"""HEFT and CPoP (Topcuoglu, Hariri and Wu, IEEE TPDS 13(3), 2002) and the lower bound.

Both are list schedulers with the paper's insertion policy: a task goes into the earliest
idle slot of a node that starts after its inputs have arrived and is long enough to hold
it. Definitions, with ``w_bar(i)`` the mean of ``cost(i) / speed`` over the nodes:

* HEFT: ``rank_u(i) = w_bar(i) + max over children j of (c_bar(i, j) + rank_u(j))``;
  tasks in decreasing ``rank_u``, each on the node that gives it the earliest finish.
* CPoP: ``rank_d(i) = max over parents j of (rank_d(j) + w_bar(j) + c_bar(j, i))``
  (0 for an entry task); ``priority = rank_u + rank_d``; ``|CP|`` the entry's priority.
  The critical path is walked from the entry through successors whose priority equals
  ``|CP|``; its tasks all run on the node that minimises their summed execution time, the
  others on their earliest-finish node, in order of decreasing priority among ready tasks.

``convention="published"`` (the default) uses the paper's mean communication cost,
``c_bar = size / B_bar`` with ``B_bar`` the mean bandwidth over pairs of distinct nodes.
``convention="saga"`` reproduces SAGA 2.0 (``anrg-saga``), which differs in three places
(see docs/static.md): ``c_bar`` is ``size`` times the mean of ``1 / bandwidth`` over the
network's links *including one self-link per node* (infinite bandwidth, so 0);
CPoP's ``rank_d`` adds the task's *own* cost over the mean speed instead of the parent's
mean execution time (and, since SAGA joins several entry tasks under a zero-cost source,
an entry task's ``rank_d`` is then its own cost over the mean speed); and its critical
path is every task whose priority is within ``numpy.isclose`` of ``|CP|``.

Tie-breaking (ours; SAGA's follows from set iteration order, see docs/static.md): equal
ranks go in topological order (Kahn's algorithm, lowest graph insertion index first),
equal finish times to the node that comes first in the network, equal CPoP priorities
among ready tasks in the same topological order, and the critical-path walk takes the
successor whose priority is closest to ``|CP|`` (then the earliest in that order).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Iterable
from typing import Literal

import networkx as nx

from scalesched.errors import InputError
from scalesched.static.problem import StaticProblem, build_problem
from scalesched.static.schedule import Schedule, ScheduledTask

Convention = Literal["published", "saga"]
CONVENTIONS: tuple[str, ...] = ("published", "saga")
CP_REL_TOL = 1e-9
"""Relative tolerance of the published critical-path walk (priorities are sums in
different orders, so exact equality would depend on rounding)."""


def _check_convention(convention: str) -> None:
    if convention not in CONVENTIONS:
        raise InputError(
            "convention", "convention", f"unknown {convention!r}; known: {', '.join(CONVENTIONS)}"
        )


# --------------------------------------------------------------------------- ranks


def mean_exec_times(prob: StaticProblem) -> list[float]:
    """``w_bar(i)``: the mean over nodes of ``cost(i) / speed``."""
    n = prob.n_nodes
    return [sum(c / s for s in prob.speed) / n for c in prob.cost]


def mean_comm_costs(prob: StaticProblem, convention: Convention = "published") -> list[list[float]]:
    """``c_bar(i, j)`` per child edge of each task, in ``prob.children`` order."""
    _check_convention(convention)
    n = prob.n_nodes
    links = [prob.bandwidth[a][b] for a in range(n) for b in range(a + 1, n)]
    if convention == "published":
        b_bar = sum(links) / len(links) if links else math.inf
        return [[size / b_bar for _, size in ch] for ch in prob.children]
    # SAGA: mean of size / bandwidth over n(n-1)/2 links and n self-links of infinite speed.
    inv = sum(1.0 / b for b in links) / (len(links) + n)
    return [[size * inv for _, size in ch] for ch in prob.children]


def upward_ranks(prob: StaticProblem, convention: Convention = "published") -> list[float]:
    """HEFT's ``rank_u`` per task (index order of ``prob.tasks``)."""
    w_bar = mean_exec_times(prob)
    comm = mean_comm_costs(prob, convention)
    rank = [0.0] * prob.n_tasks
    for i in reversed(prob.topo):
        best = 0.0
        for (j, _), c in zip(prob.children[i], comm[i], strict=True):
            x = rank[j] + c
            if x > best:
                best = x
        rank[i] = w_bar[i] + best
    return rank


def downward_ranks(prob: StaticProblem, convention: Convention = "published") -> list[float]:
    """CPoP's ``rank_d`` per task (see the module docstring for the two conventions)."""
    comm = mean_comm_costs(prob, convention)
    in_comm: list[list[tuple[int, float]]] = [[] for _ in range(prob.n_tasks)]
    for u in range(prob.n_tasks):
        for (v, _), c in zip(prob.children[u], comm[u], strict=True):
            in_comm[v].append((u, c))
    rank = [0.0] * prob.n_tasks
    if convention == "published":
        w_bar = mean_exec_times(prob)
        for i in prob.topo:
            best = 0.0
            for u, c in in_comm[i]:
                x = rank[u] + w_bar[u] + c
                if x > best:
                    best = x
            rank[i] = best
        return rank
    mean_speed = sum(prob.speed) / prob.n_nodes
    several_entries = sum(1 for p in prob.parents if not p) > 1
    for i in prob.topo:
        own = prob.cost[i] / mean_speed
        if not in_comm[i]:
            rank[i] = own if several_entries else 0.0
            continue
        best = -math.inf
        for u, c in in_comm[i]:
            x = rank[u] + c + own
            if x > best:
                best = x
        rank[i] = best
    return rank


# --------------------------------------------------------------------------- placement


class _Builder:
    """Per-node timelines with the insertion policy."""

    def __init__(self, prob: StaticProblem) -> None:
        self.prob = prob
        n = prob.n_nodes
        self.starts: list[list[float]] = [[] for _ in range(n)]
        self.ends: list[list[float]] = [[] for _ in range(n)]
        self.node_of = [-1] * prob.n_tasks
        self.start = [0.0] * prob.n_tasks
        self.finish = [0.0] * prob.n_tasks

    def ready_time(self, i: int, p: int) -> float:
        prob = self.prob
        bw = prob.bandwidth[p]
        ready = 0.0
        for u, size in prob.parents[i]:
            q = self.node_of[u]
            arrive = self.finish[u] if q == p else self.finish[u] + size / bw[q]
            if arrive > ready:
                ready = arrive
        return ready

    def slot(self, p: int, ready: float, duration: float) -> tuple[float, int]:
        """Earliest start >= ready in an idle slot of node p that holds ``duration``."""
        starts, ends = self.starts[p], self.ends[p]
        # Slots that close before `ready` cannot hold the task: skip them by bisection.
        j = bisect_left(starts, ready)
        n = len(starts)
        while True:
            gap_start = ends[j - 1] if j > 0 else 0.0
            s = ready if ready > gap_start else gap_start
            if j == n or s + duration <= starts[j]:
                return s, j
            j += 1

    def place(self, i: int, candidates: Iterable[int]) -> None:
        """Put task i on the candidate node with the earliest finish (first node on ties)."""
        prob = self.prob
        best_f = math.inf
        best: tuple[int, float, int] | None = None
        for p in candidates:
            d = prob.cost[i] / prob.speed[p]
            s, pos = self.slot(p, self.ready_time(i, p), d)
            f = s + d
            if best is None or f < best_f:
                best_f, best = f, (p, s, pos)
        assert best is not None
        p, s, pos = best
        self.starts[p].insert(pos, s)
        self.ends[p].insert(pos, best_f)
        self.node_of[i], self.start[i], self.finish[i] = p, s, best_f

    def schedule(self, policy: str, info: dict[str, float | str | bool]) -> Schedule:
        prob = self.prob
        return Schedule.from_tasks(
            prob.nodes,
            (
                ScheduledTask(
                    prob.nodes[self.node_of[i]], prob.tasks[i], self.start[i], self.finish[i]
                )
                for i in range(prob.n_tasks)
            ),
            policy=policy,
            info=info,
        )


# --------------------------------------------------------------------------- schedulers


def heft_problem(prob: StaticProblem, convention: Convention = "published") -> Schedule:
    """HEFT on an already built problem (see :func:`heft`)."""
    rank = upward_ranks(prob, convention)
    order = sorted(range(prob.n_tasks), key=lambda i: (-rank[i], prob.topo_pos[i]))
    b = _Builder(prob)
    every = range(prob.n_nodes)
    for i in order:
        b.place(i, every)
    return b.schedule("heft", {"convention": convention})


def heft(
    task_graph: nx.DiGraph, network: nx.Graph, *, convention: Convention = "published"
) -> Schedule:
    """HEFT: tasks by decreasing upward rank, each on its earliest-finish node (insertion)."""
    _check_convention(convention)
    return heft_problem(build_problem(task_graph, network), convention)


def critical_path(prob: StaticProblem, convention: Convention = "published") -> list[int]:
    """CPoP's critical-path tasks, by index (a path for ``published``, a set for ``saga``)."""
    up = upward_ranks(prob, convention)
    down = downward_ranks(prob, convention)
    prio = [a + b for a, b in zip(up, down, strict=True)]
    entries = [i for i in prob.topo if not prob.parents[i]]
    if convention == "saga":
        # SAGA's |CP| is the priority of its (possibly added zero-cost) entry task.
        cp = max(up[e] for e in entries) if len(entries) > 1 else prio[entries[0]]
        return [i for i in prob.topo if abs(prio[i] - cp) <= 1e-8 + 1e-5 * abs(cp)]
    cp = max(prio[e] for e in entries)
    k = next(e for e in entries if prio[e] == cp)
    path = [k]
    while prob.children[k]:
        near = [
            j
            for j, _ in prob.children[k]
            if math.isclose(prio[j], cp, rel_tol=CP_REL_TOL, abs_tol=0.0)
        ]
        if not near:
            break
        k = min(near, key=lambda j: (abs(prio[j] - cp), prob.topo_pos[j]))
        path.append(k)
    return path


def cpop_problem(prob: StaticProblem, convention: Convention = "published") -> Schedule:
    """CPoP on an already built problem (see :func:`cpop`)."""
    up = upward_ranks(prob, convention)
    down = downward_ranks(prob, convention)
    prio = [a + b for a, b in zip(up, down, strict=True)]
    on_cp = set(critical_path(prob, convention))
    cp_node, best = 0, math.inf
    for p in range(prob.n_nodes):
        total = sum(prob.cost[i] / prob.speed[p] for i in on_cp)
        if total < best:
            cp_node, best = p, total
    b = _Builder(prob)
    every = range(prob.n_nodes)
    only_cp = (cp_node,)
    missing = [len(p) for p in prob.parents]
    heap = [(-prio[i], prob.topo_pos[i], i) for i in range(prob.n_tasks) if not missing[i]]
    heapq.heapify(heap)
    while heap:
        _, _, i = heapq.heappop(heap)
        b.place(i, only_cp if i in on_cp else every)
        for j, _ in prob.children[i]:
            missing[j] -= 1
            if missing[j] == 0:
                heapq.heappush(heap, (-prio[j], prob.topo_pos[j], j))
    return b.schedule(
        "cpop",
        {"convention": convention, "cp_node": str(prob.nodes[cp_node]), "cp_tasks": len(on_cp)},
    )


def cpop(
    task_graph: nx.DiGraph, network: nx.Graph, *, convention: Convention = "published"
) -> Schedule:
    """CPoP: critical-path tasks on one node, the rest by earliest finish, by priority."""
    _check_convention(convention)
    return cpop_problem(build_problem(task_graph, network), convention)


def lower_bound_problem(prob: StaticProblem) -> float:
    """See :func:`lower_bound`."""
    fastest = max(prob.speed)
    finish = [0.0] * prob.n_tasks
    for i in prob.topo:
        ready = max((finish[u] for u, _ in prob.parents[i]), default=0.0)
        finish[i] = ready + prob.cost[i] / fastest
    return max(finish)


def lower_bound(task_graph: nx.DiGraph, network: nx.Graph) -> float:
    """Contention-free bound: the critical path with every task on the fastest node and no
    transfers. No schedule of the problem finishes earlier."""
    return lower_bound_problem(build_problem(task_graph, network))
