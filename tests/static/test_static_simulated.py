"""eft, SCALE and other simulator policies on the static problem (same ground as HEFT)."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from static_cases import random_instances

from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.static import (
    build_problem,
    heft,
    lower_bound,
    static_schedule,
    validate_schedule,
)
from scalesched.static.generate import random_network, random_task_graph
from scalesched.static.simulated import nic_rates, simulator_problem


def uniform_network(speeds: list[float], bandwidth: float) -> nx.Graph:
    net = nx.Graph()
    for k, s in enumerate(speeds):
        net.add_node(f"n{k}", weight=s)
    for a in range(len(speeds)):
        for b in range(a + 1, len(speeds)):
            net.add_edge(f"n{a}", f"n{b}", weight=bandwidth)
    return net


def test_eft_gives_a_valid_schedule_never_below_the_bound() -> None:
    for _, tg, net in random_instances(seed=11, count=15):
        s = static_schedule(tg, net, "eft")
        validate_schedule(s, tg, net)
        assert s.policy == "eft"
        assert s.makespan >= lower_bound(tg, net) * (1 - 1e-12)
        # One link always factors; random links among 3+ nodes do not factor as min(a, b).
        assert s.info["bandwidth_exact"] is (net.number_of_nodes() == 2)
        assert s.info["sim_makespan"] > 0


def test_single_parent_tasks_on_an_exact_network_retime_to_the_simulator() -> None:
    """With one bandwidth for all links the simulator's network is the real one, and for
    tasks with one parent it starts each transfer when the parent ends, as HEFT does: the
    re-timed makespan is the simulator's."""
    rng = np.random.default_rng(0)
    for shape in ("chain", "fork"):
        tg = random_task_graph(shape, 12, rng)
        net = uniform_network([1.0, 1.7, 0.6], bandwidth=2.0)
        s = static_schedule(tg, net, "eft")
        assert s.info["bandwidth_exact"] is True
        assert s.makespan == pytest.approx(s.info["sim_makespan"], rel=1e-9)


def test_retimed_is_never_later_than_the_simulator_on_exact_networks() -> None:
    rng = np.random.default_rng(1)
    for shape in ("diamond", "layered", "join"):
        tg = random_task_graph(shape, 20, rng)
        net = uniform_network([1.0, 2.0, 0.5, 1.3], bandwidth=0.7)
        for policy in ("eft", "least_loaded", "random"):
            s = static_schedule(tg, net, policy)
            validate_schedule(s, tg, net)
            assert s.makespan <= s.info["sim_makespan"] * (1 + 1e-9)


def test_nic_rates_are_exact_when_bandwidths_factor_as_a_min() -> None:
    x = {"a": 4.0, "b": 1.0, "c": 2.5}
    net = nx.Graph()
    for n in x:
        net.add_node(n, weight=1.0)
    for a in x:
        for b in x:
            if a < b:
                net.add_edge(a, b, weight=min(x[a], x[b]))
    tg = nx.DiGraph()
    tg.add_node("t", weight=1.0)
    prob = build_problem(tg, net)
    rate, exact = nic_rates(prob)
    assert exact and rate == [2.5, 1.0, 2.5]  # a's fastest link is to c
    net.edges["a", "b"]["weight"] = 3.0
    assert nic_rates(build_problem(tg, net)) == ([3.0, 3.0, 2.5], False)  # b-c is 1


def test_simulator_problem_maps_costs_speeds_and_bytes() -> None:
    tg = nx.DiGraph()
    tg.add_node("x", weight=3.0)
    tg.add_node("y", weight=2.0)
    tg.add_edge("x", "y", weight=8.0)
    net = uniform_network([2.0, 1.0], bandwidth=4.0)
    cluster, job, exact = simulator_problem(build_problem(tg, net))
    assert exact and cluster.network_latency_s == 0.0
    assert [(s.cpu_cores, s.core_speed, s.gpus) for s in cluster.servers] == [
        (1, 2.0, 0),
        (1, 1.0, 0),
    ]
    assert cluster.servers[0].nic_gbps * 1e9 / 8 == pytest.approx(4.0)
    wf = job.workflow
    assert job.arrival == 0.0 and [t.cpu_work for t in wf.tasks] == [3.0, 2.0]
    assert all(t.kind == "tool" for t in wf.tasks) and wf.edge_bytes == {(0, 1): 8.0}


def test_named_list_schedulers_and_scheduler_objects() -> None:
    _, tg, net = next(random_instances(seed=5, count=1))
    assert static_schedule(tg, net, "heft").makespan == heft(tg, net).makespan
    assert static_schedule(tg, net, get_policy("eft")).makespan == pytest.approx(
        static_schedule(tg, net, "eft").makespan
    )
    with pytest.raises(InputError, match="unknown policy"):
        static_schedule(tg, net, "no-such-policy")


def save_untrained(path: Path, kind: str) -> Path:
    import torch

    from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
    from scalesched.nn import build_network
    from scalesched.nn.checkpoint import save_checkpoint

    torch.manual_seed(0)
    cfg: dict[str, int] = {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES}
    if kind == "scale":
        cfg |= {"d_model": 16, "n_heads": 2, "critic_hidden": 16}
    net = build_network(kind, **cfg)
    save_checkpoint(
        path,
        {
            "network": kind,
            "state_dict": net.state_dict(),
            "network_config": cfg,
            "metadata": {"name": f"untrained-{kind}"},
        },
    )
    return path


def test_an_untrained_scale_checkpoint_schedules_the_static_problem(tmp_path: Path) -> None:
    ckpt = str(save_untrained(tmp_path / "scale.pt", "scale"))
    rng = np.random.default_rng(2)
    tg = random_task_graph("layered", 25, rng)
    net = random_network(5, rng)
    a = static_schedule(tg, net, ckpt, seed=3)
    validate_schedule(a, tg, net)
    assert a.policy == ckpt  # a local checkpoint is named by its path, not its metadata
    assert a.makespan >= lower_bound(tg, net)
    b = static_schedule(tg, net, ckpt, seed=3)
    assert a.placement() == b.placement()  # seeded sampling: same seed, same schedule


def test_a_fixed_size_network_refuses_another_node_count(tmp_path: Path) -> None:
    ckpt = str(save_untrained(tmp_path / "mlp.pt", "mlp16"))
    _, tg, net = next(random_instances(seed=1, count=1))
    with pytest.raises(InputError, match="accepts exactly 16 servers"):
        static_schedule(tg, net, ckpt)
