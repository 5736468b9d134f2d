"""The static problem in SAGA's conventions, checked once and flattened to lists of numbers.

A *task graph* is a ``networkx.DiGraph`` whose node ``weight`` is the task's cost and whose
edge ``weight`` is the size of the data the parent sends the child (0 when absent). A
*network* is an undirected ``networkx.Graph`` whose node ``weight`` is the node's speed and
whose edge ``weight`` is the link's bandwidth; every pair of distinct nodes needs a link.
Execution takes ``cost / speed``; a transfer ``size / bandwidth``, and nothing when parent
and child share a node (self-loops of the network are ignored).

Every problem is an :class:`~scalesched.errors.InputError` naming the graph and the node or
edge, e.g. ``network: edges[('a', 'b')].weight: must be > 0, got 0``.
"""

from __future__ import annotations

import heapq
import math
import numbers
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import networkx as nx

from scalesched.errors import InputError

TASK_GRAPH = "task_graph"
NETWORK = "network"


@dataclass(frozen=True, slots=True)
class StaticProblem:
    """One task graph on one network, by index. Tasks keep the graph's insertion order."""

    tasks: tuple[Hashable, ...]
    cost: tuple[float, ...]
    parents: tuple[tuple[tuple[int, float], ...], ...]
    """Per task: (parent index, data size) in the graph's edge order."""
    children: tuple[tuple[tuple[int, float], ...], ...]
    topo: tuple[int, ...]
    """A topological order: Kahn's algorithm, lowest insertion index first among ready tasks."""
    topo_pos: tuple[int, ...]
    nodes: tuple[Hashable, ...]
    speed: tuple[float, ...]
    bandwidth: tuple[tuple[float, ...], ...]
    """bandwidth[a][b] for a != b; ``inf`` on the diagonal (a transfer on one node is free)."""

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def exec_time(self, i: int, p: int) -> float:
        return self.cost[i] / self.speed[p]

    def transfer_time(self, size: float, a: int, b: int) -> float:
        return 0.0 if a == b else size / self.bandwidth[a][b]


def _number(v: Any, source: str, field: str, *, positive: bool, allow_inf: bool) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InputError(source, field, f"expected a number, got {type(v).__name__} {v!r}")
    x = float(v)
    if math.isnan(x) or (math.isinf(x) and not (allow_inf and x > 0)):
        raise InputError(source, field, f"must be finite, got {x}")
    if positive and x <= 0:
        raise InputError(source, field, f"must be > 0, got {x:g}")
    if x < 0:
        raise InputError(source, field, f"must be >= 0, got {x:g}")
    return x


def build_problem(task_graph: nx.DiGraph, network: nx.Graph) -> StaticProblem:
    """Check a task graph and a network and flatten them (see the module docstring)."""
    if not isinstance(task_graph, nx.DiGraph) or task_graph.is_multigraph():
        raise InputError(TASK_GRAPH, "type", "expected a networkx.DiGraph")
    if not isinstance(network, nx.Graph) or network.is_directed() or network.is_multigraph():
        raise InputError(NETWORK, "type", "expected an undirected networkx.Graph")
    if task_graph.number_of_nodes() == 0:
        raise InputError(TASK_GRAPH, "nodes", "a task graph needs at least one task")
    if network.number_of_nodes() == 0:
        raise InputError(NETWORK, "nodes", "a network needs at least one node")

    tasks = tuple(task_graph.nodes)
    index = {t: i for i, t in enumerate(tasks)}
    cost = []
    for t, data in task_graph.nodes(data=True):
        if "weight" not in data:
            raise InputError(TASK_GRAPH, f"nodes[{t!r}].weight", "missing (the task's cost)")
        cost.append(
            _number(
                data["weight"], TASK_GRAPH, f"nodes[{t!r}].weight", positive=False, allow_inf=False
            )
        )
    parents: list[list[tuple[int, float]]] = [[] for _ in tasks]
    children: list[list[tuple[int, float]]] = [[] for _ in tasks]
    for u, v, data in task_graph.edges(data=True):
        if u == v:
            raise InputError(TASK_GRAPH, f"edges[{(u, v)!r}]", "a task cannot depend on itself")
        size = _number(
            data.get("weight", 0.0),
            TASK_GRAPH,
            f"edges[{(u, v)!r}].weight",
            positive=False,
            allow_inf=False,
        )
        parents[index[v]].append((index[u], size))
        children[index[u]].append((index[v], size))
    topo = _topological_order(tasks, parents, children)

    nodes = tuple(network.nodes)
    pos = {n: k for k, n in enumerate(nodes)}
    speed: list[float] = []
    for n, data in network.nodes(data=True):
        if "weight" not in data:
            raise InputError(NETWORK, f"nodes[{n!r}].weight", "missing (the node's speed)")
        speed.append(
            _number(data["weight"], NETWORK, f"nodes[{n!r}].weight", positive=True, allow_inf=False)
        )
    inf = math.inf
    bw = [[inf] * len(nodes) for _ in nodes]
    for a, b, data in network.edges(data=True):
        if a == b:
            continue
        if "weight" not in data:
            raise InputError(NETWORK, f"edges[{(a, b)!r}].weight", "missing (the link's bandwidth)")
        x = _number(
            data["weight"], NETWORK, f"edges[{(a, b)!r}].weight", positive=True, allow_inf=True
        )
        bw[pos[a]][pos[b]] = bw[pos[b]][pos[a]] = x
    for a in nodes:
        for b in nodes:
            if a != b and not network.has_edge(a, b):
                raise InputError(
                    NETWORK, f"edges[{(a, b)!r}]", "missing: the network must be fully connected"
                )
    return StaticProblem(
        tasks=tasks,
        cost=tuple(cost),
        parents=tuple(tuple(p) for p in parents),
        children=tuple(tuple(c) for c in children),
        topo=tuple(topo),
        topo_pos=tuple(_positions(topo)),
        nodes=nodes,
        speed=tuple(speed),
        bandwidth=tuple(tuple(row) for row in bw),
    )


def _positions(order: list[int]) -> list[int]:
    pos = [0] * len(order)
    for k, i in enumerate(order):
        pos[i] = k
    return pos


def _topological_order(
    tasks: tuple[Hashable, ...],
    parents: list[list[tuple[int, float]]],
    children: list[list[tuple[int, float]]],
) -> list[int]:
    indeg = [len(p) for p in parents]
    heap = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(heap)
    order: list[int] = []
    while heap:
        u = heapq.heappop(heap)
        order.append(u)
        for v, _ in children[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
    if len(order) < len(tasks):
        stuck = min(i for i, d in enumerate(indeg) if d > 0)
        raise InputError(
            TASK_GRAPH, "edges", f"the dependencies form a cycle (through task {tasks[stuck]!r})"
        )
    return order
