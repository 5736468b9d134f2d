"""Random static problems: task graphs of the usual shapes and heterogeneous networks.

Costs, data sizes, speeds and bandwidths are drawn from continuous uniform distributions,
so ties (equal ranks, equal finish times) have probability zero: what the cross-check with
SAGA needs. Task and node names are strings (``t0``, ``n0``, ...), as SAGA requires.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

SHAPES = ("chain", "fork", "join", "diamond", "layered")


def random_network(
    n_nodes: int,
    rng: np.random.Generator,
    *,
    speed: tuple[float, float] = (0.5, 2.0),
    bandwidth: tuple[float, float] = (0.5, 2.0),
) -> nx.Graph:
    """A fully connected network ``n0..`` with uniform random speeds and link bandwidths."""
    g = nx.Graph()
    for a in range(n_nodes):
        g.add_node(f"n{a}", weight=float(rng.uniform(*speed)))
    for a in range(n_nodes):
        for b in range(a + 1, n_nodes):
            g.add_edge(f"n{a}", f"n{b}", weight=float(rng.uniform(*bandwidth)))
    return g


def random_task_graph(
    shape: str,
    n_tasks: int,
    rng: np.random.Generator,
    *,
    cost: tuple[float, float] = (1.0, 10.0),
    size: tuple[float, float] = (0.1, 10.0),
    max_width: int = 5,
) -> nx.DiGraph:
    """A task graph of about ``n_tasks`` tasks (at least 3 for fork, join and diamond).

    ``chain``: t0 -> t1 -> ...; ``fork``: one task feeding all others; ``join``: all
    feeding the last; ``diamond``: a fork then a join; ``layered``: layers of 1 to
    ``max_width`` tasks, each task with 1 to all tasks of the previous layer as parents.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
    n = max(n_tasks, 1 if shape in ("chain", "layered") else 3)
    g = nx.DiGraph()
    for i in range(n):
        g.add_node(f"t{i}", weight=float(rng.uniform(*cost)))

    def edge(u: int, v: int) -> None:
        g.add_edge(f"t{u}", f"t{v}", weight=float(rng.uniform(*size)))

    if shape == "chain":
        for i in range(n - 1):
            edge(i, i + 1)
    elif shape == "fork":
        for i in range(1, n):
            edge(0, i)
    elif shape == "join":
        for i in range(n - 1):
            edge(i, n - 1)
    elif shape == "diamond":
        for i in range(1, n - 1):
            edge(0, i)
            edge(i, n - 1)
    else:
        layers: list[list[int]] = []
        k = 0
        while k < n:
            w = int(rng.integers(1, max_width + 1))
            layers.append(list(range(k, min(n, k + w))))
            k += w
        for prev, layer in zip(layers, layers[1:], strict=False):
            for v in layer:
                m = int(rng.integers(1, len(prev) + 1))
                for u in sorted(rng.choice(prev, size=m, replace=False).tolist()):
                    edge(u, v)
    return g
