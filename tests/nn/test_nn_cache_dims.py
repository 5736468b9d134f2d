"""Networks with and without the cache server features: a network reads the first
``server_dim`` columns of ``Decision.server_features``, so older checkpoints act unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import BASE_SERVER_FEATURES, SERVER_FEATURES, TASK_FEATURES
from scalesched.errors import InputError
from scalesched.nn import build_network
from scalesched.nn.checkpoint import save_checkpoint
from scalesched.nn.scheduler import load_scheduler
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation

torch.set_num_threads(1)


def save(tmp_path: Path, server_dim: int, built_dim: int | None = None) -> Path:
    torch.manual_seed(0)
    net = build_network("scale", TASK_FEATURES, built_dim or server_dim, d_model=16, n_heads=2)
    data: dict[str, Any] = {
        "network": "scale",
        "network_config": {
            "task_dim": TASK_FEATURES,
            "server_dim": server_dim,
            "d_model": 16,
            "n_heads": 2,
        },
        "state_dict": net.state_dict(),
        "metadata": {"name": "t"},
    }
    path = tmp_path / f"c{server_dim}.pt"
    save_checkpoint(path, data)
    return path


@pytest.mark.parametrize("dim", [BASE_SERVER_FEATURES, SERVER_FEATURES])
def test_both_widths_load_and_read_their_columns(tmp_path: Path, dim: int) -> None:
    fast = load_scheduler(save(tmp_path, dim), greedy=True)
    slow = load_scheduler(save(tmp_path, dim), greedy=True, fast=False)
    assert fast.server_dim == slow.server_dim == dim
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="tool-heavy", workflows=6, rate=1.4, seed=2))
    sim = Simulation(spec, jobs, tables=tables, kv_policy="lru")
    eft = get_policy("eft")
    d = sim.next_decision()
    steps = 0
    while d is not None and steps < 40:
        assert fast.actor is not None
        got = fast.actor.logits(d.task_features, d.server_features[:, :dim], d.mask)
        want = slow.forward(d).logits[0].numpy()
        np.testing.assert_allclose(got[d.mask], want[d.mask], rtol=0, atol=1e-4)
        assert fast.select(d) == slow.select(d)
        sim.apply(eft.select(d))
        d = sim.next_decision()
        steps += 1


def test_other_widths_are_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="network_config.server_dim"):
        load_scheduler(save(tmp_path, 19))
