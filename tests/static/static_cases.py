"""Shared helpers of the static-scheduling tests: instances and the SAGA bridge."""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx
import numpy as np

from scalesched.static import Schedule, ScheduledTask
from scalesched.static.generate import SHAPES, random_network, random_task_graph

SAGA_DUMMIES = ("__super_source__", "__super_sink__")


def random_instances(
    seed: int, count: int, shapes: tuple[str, ...] = SHAPES
) -> Iterator[tuple[str, nx.DiGraph, nx.Graph]]:
    """``count`` (shape, task graph, network) triples: 5-40 tasks, 2-6 nodes, continuous
    random costs, sizes, speeds and bandwidths."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        shape = shapes[k % len(shapes)]
        tg = random_task_graph(shape, int(rng.integers(5, 41)), rng)
        net = random_network(int(rng.integers(2, 7)), rng, bandwidth=(0.2, 5.0))
        yield shape, tg, net


def saga_schedules(tg: nx.DiGraph, net: nx.Graph) -> tuple[Schedule, Schedule]:
    """SAGA 2.0's HEFT and CPoP schedules of the instance, as our Schedule (its zero-cost
    super source and sink, added when the graph has several entries or exits, dropped)."""
    from saga import Network, TaskGraph
    from saga.schedulers.cpop import CpopScheduler
    from saga.schedulers.heft import HeftScheduler

    task_graph = TaskGraph.from_nx(tg)
    network = Network.from_nx(net)
    out = []
    for scheduler in (HeftScheduler(), CpopScheduler()):
        s = scheduler.schedule(network, task_graph)
        out.append(
            Schedule.from_tasks(
                list(net.nodes),
                (
                    ScheduledTask(t.node, t.name, t.start, t.end)
                    for _, tasks in s.items()
                    for t in tasks
                    if t.name not in SAGA_DUMMIES
                ),
                policy=type(scheduler).__name__,
            )
        )
    return out[0], out[1]
