"""HEFT, CPoP, the lower bound and schedule validation on hand-checked cases."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from static_cases import random_instances

from scalesched.errors import InputError
from scalesched.static import (
    Schedule,
    ScheduledTask,
    ScheduleError,
    build_problem,
    cpop,
    heft,
    lower_bound,
    validate_schedule,
)
from scalesched.static.listsched import _Builder, critical_path, upward_ranks


def make(
    tasks: list[tuple[str, float]],
    deps: list[tuple[str, str, float]],
    nodes: list[tuple[str, float]],
    bandwidth: float = 1.0,
) -> tuple[nx.DiGraph, nx.Graph]:
    tg = nx.DiGraph()
    for name, cost in tasks:
        tg.add_node(name, weight=cost)
    for u, v, size in deps:
        tg.add_edge(u, v, weight=size)
    net = nx.Graph()
    for name, speed in nodes:
        net.add_node(name, weight=speed)
    names = [n for n, _ in nodes]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            net.add_edge(a, b, weight=bandwidth)
    return tg, net


def test_heft_by_hand() -> None:
    """w_bar = cost x (1/2 + 1)/2; rank_u: a = 3 + max(1 + 1.5, 3 + 4.5) = 10.5, c = 4.5,
    b = 1.5. a on p0 [0, 2]; c on p0 [2, 5] (p1: data at 5, done at 11); b on p1 [3, 5]
    (p0 would end at 6)."""
    tg, net = make(
        [("a", 4), ("b", 2), ("c", 6)], [("a", "b", 1), ("a", "c", 3)], [("p0", 2), ("p1", 1)]
    )
    prob = build_problem(tg, net)
    assert upward_ranks(prob) == pytest.approx([10.5, 1.5, 4.5])
    s = heft(tg, net)
    assert [(t.name, t.start, t.end) for t in s["p0"]] == [("a", 0, 2), ("c", 2, 5)]
    assert [(t.name, t.start, t.end) for t in s["p1"]] == [("b", 3, 5)]
    assert s.makespan == 5 == lower_bound(tg, net)
    assert s.placement() == {"a": "p0", "b": "p1", "c": "p0"}
    assert s.task("b") == ScheduledTask("p1", "b", 3, 5)
    assert len(s) == 3 and dict(s.items()).keys() == {"p0", "p1"}
    validate_schedule(s, tg, net)


def test_chain_runs_on_the_fastest_node_and_meets_the_bound() -> None:
    tg, net = make(
        [("a", 2), ("b", 3), ("c", 5)],
        [("a", "b", 1), ("b", "c", 1)],
        [("slow", 1), ("fast", 2.5), ("mid", 2)],
    )
    for sched in (
        heft(tg, net),
        cpop(tg, net),
        heft(tg, net, convention="saga"),
        cpop(tg, net, convention="saga"),
    ):
        assert sched.placement() == {"a": "fast", "b": "fast", "c": "fast"}
        assert sched.makespan == pytest.approx(10 / 2.5) == lower_bound(tg, net)
    assert cpop(tg, net).info["cp_node"] == "fast"


def test_cpop_puts_the_whole_critical_path_on_one_node() -> None:
    tg, net = make(
        [("s", 2), ("x", 8), ("y", 1), ("t", 2)],
        [("s", "x", 1), ("s", "y", 1), ("x", "t", 1), ("y", "t", 1)],
        [("p0", 1.0), ("p1", 1.5)],
    )
    prob = build_problem(tg, net)
    assert [prob.tasks[i] for i in critical_path(prob)] == ["s", "x", "t"]
    s = cpop(tg, net)
    assert {s.task(n).node for n in ("s", "x", "t")} == {"p1"}
    validate_schedule(s, tg, net)


def test_insertion_uses_the_earliest_gap_that_fits() -> None:
    tg, net = make([("a", 1)], [], [("p", 1)])
    b = _Builder(build_problem(tg, net))
    b.starts[0], b.ends[0] = [0.0, 5.0], [2.0, 6.0]
    assert b.slot(0, ready=1.0, duration=2.0) == (2.0, 1)  # gap 2..5
    assert b.slot(0, ready=1.0, duration=4.0) == (6.0, 2)  # too long for it: after 6
    assert b.slot(0, ready=3.5, duration=1.5) == (3.5, 1)
    assert b.slot(0, ready=3.5, duration=1.6) == (6.0, 2)
    b.starts[0], b.ends[0] = [3.0], [4.0]
    assert b.slot(0, ready=0.0, duration=3.0) == (0.0, 0)  # before the first task


def test_heft_inserts_a_late_task_into_an_early_gap() -> None:
    """w_bar = 0.9 x cost; ranks a 9.4, e 8.3, c 3.6, b 0.9. a on p1 [0, 1.6]; e on p0
    [0, 3]; c waits for e's data on p1 until 5 -> [5, 8.2], leaving p1 idle 1.6..5; b,
    placed last, goes into that gap [1.6, 2.4] (p0 would end it at 4)."""
    tg, net = make(
        [("a", 2), ("e", 3), ("c", 4), ("b", 1)],
        [("a", "c", 4), ("e", "c", 2)],
        [("p0", 1.0), ("p1", 1.25)],
    )
    assert upward_ranks(build_problem(tg, net)) == pytest.approx([9.4, 8.3, 3.6, 0.9])
    s = heft(tg, net)
    assert [t.name for t in s["p1"]] == ["a", "b", "c"]
    times = [x for t in s["p1"] for x in (t.start, t.end)]
    assert times == pytest.approx([0, 1.6, 1.6, 2.4, 5, 8.2])
    assert [(t.name, t.start, t.end) for t in s["p0"]] == [("e", 0, 3)]
    assert s.makespan == pytest.approx(8.2)


def test_ties_go_to_the_first_node_and_the_first_task_in_graph_order() -> None:
    tg, net = make([("t0", 2), ("t1", 2)], [], [("n0", 1), ("n1", 1)])
    s = heft(tg, net)
    assert s.placement() == {"t0": "n0", "t1": "n1"}
    tg2, net2 = make([("t1", 2), ("t0", 2)], [], [("n1", 1), ("n0", 1)])
    assert heft(tg2, net2).placement() == {"t1": "n1", "t0": "n0"}
    one, two = make([("x", 3)], [], [("b", 2), ("a", 2)])
    assert heft(one, two).placement() == {"x": "b"}
    assert cpop(one, two).placement() == {"x": "b"}


def test_zero_cost_tasks_and_zero_size_edges() -> None:
    tg, net = make(
        [("src", 0), ("a", 3), ("b", 4), ("sink", 0)],
        [("src", "a", 0), ("src", "b", 0), ("a", "sink", 0), ("b", "sink", 0)],
        [("p0", 1), ("p1", 2)],
    )
    for s in (heft(tg, net), cpop(tg, net)):
        validate_schedule(s, tg, net)
        assert s.makespan == pytest.approx(3.0)


def test_lower_bound_never_beaten_and_schedules_valid() -> None:
    for _, tg, net in random_instances(seed=7, count=30):
        lb = lower_bound(tg, net)
        for conv in ("published", "saga"):
            for fn in (heft, cpop):
                s = fn(tg, net, convention=conv)
                validate_schedule(s, tg, net)
                assert s.makespan >= lb * (1 - 1e-12)
                assert len(s) == tg.number_of_nodes()


def test_deterministic() -> None:
    _, tg, net = next(random_instances(seed=3, count=1, shapes=("layered",)))
    a, b = heft(tg, net), heft(tg, net)
    assert [(t.name, t.node, t.start) for t in a] == [(t.name, t.node, t.start) for t in b]


# --------------------------------------------------------------------------- inputs


def test_input_errors_name_the_graph_and_the_field() -> None:
    tg, net = make([("a", 1), ("b", 2)], [("a", "b", 1)], [("p", 1), ("q", 2)])
    bad = tg.copy()
    del bad.nodes["a"]["weight"]
    with pytest.raises(InputError, match=r"task_graph: nodes\['a'\]\.weight: missing"):
        heft(bad, net)
    bad = tg.copy()
    bad.edges["a", "b"]["weight"] = -1
    with pytest.raises(InputError, match=r"edges\[\('a', 'b'\)\]\.weight: must be >= 0"):
        heft(bad, net)
    bad = tg.copy()
    bad.add_edge("b", "a", weight=0)
    with pytest.raises(InputError, match="cycle"):
        cpop(bad, net)
    bad_net = net.copy()
    bad_net.nodes["q"]["weight"] = 0
    with pytest.raises(InputError, match=r"network: nodes\['q'\]\.weight: must be > 0"):
        heft(tg, bad_net)
    bad_net = net.copy()
    bad_net.add_node("r", weight=1)
    with pytest.raises(InputError, match="fully connected"):
        heft(tg, bad_net)
    with pytest.raises(InputError, match="undirected"):
        heft(tg, nx.DiGraph(net))
    with pytest.raises(InputError, match="DiGraph"):
        heft(nx.Graph(tg), net)
    with pytest.raises(InputError, match="convention"):
        heft(tg, net, convention="other")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="at least one task"):
        heft(nx.DiGraph(), net)


def test_numpy_weights_and_infinite_bandwidth_are_accepted() -> None:
    import numpy as np

    tg, net = make([("a", 1), ("b", 2)], [("a", "b", 5)], [("p", 1), ("q", 2)])
    tg.nodes["a"]["weight"] = np.float64(1.0)
    net.edges["p", "q"]["weight"] = math.inf
    s = heft(tg, net)
    assert s.makespan == pytest.approx(1.5)


# --------------------------------------------------------------------------- validation


def test_validate_schedule_catches_each_kind_of_error() -> None:
    tg, net = make([("a", 2), ("b", 2)], [("a", "b", 4)], [("p", 1), ("q", 2)])
    nodes = ["p", "q"]

    def sched(*tasks: ScheduledTask) -> Schedule:
        return Schedule.from_tasks(nodes, tasks)

    validate_schedule(sched(ScheduledTask("q", "a", 0, 1), ScheduledTask("p", "b", 5, 7)), tg, net)
    cases = {
        "not scheduled": sched(ScheduledTask("q", "a", 0, 1)),
        "before the data": sched(ScheduledTask("q", "a", 0, 1), ScheduledTask("p", "b", 4, 6)),
        "overlap": sched(ScheduledTask("q", "a", 0, 1), ScheduledTask("q", "b", 0.5, 1.5)),
        "expected": sched(ScheduledTask("q", "a", 0, 2), ScheduledTask("q", "b", 2, 3)),
        "not in the task graph": sched(
            ScheduledTask("q", "a", 0, 1),
            ScheduledTask("q", "b", 1, 2),
            ScheduledTask("p", "z", 0, 1),
        ),
    }
    for needle, s in cases.items():
        with pytest.raises(ScheduleError, match=needle):
            validate_schedule(s, tg, net)
