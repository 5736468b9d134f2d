"""One encoding from decision to tensors: acting and training give the same logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import SERVER_DIMS, TASK_FEATURES
from scalesched.env.scheduling_env import encode
from scalesched.nn import build_network
from scalesched.nn.common import obs_to_tensors
from scalesched.nn.scheduler import NetworkScheduler
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation

torch.set_num_threads(1)


@pytest.mark.parametrize("server_dim", SERVER_DIMS)  # without and with the cache features
def test_acting_and_training_paths_give_the_same_logits(server_dim: int) -> None:
    torch.manual_seed(3)
    net = build_network("scale", task_dim=TASK_FEATURES, server_dim=server_dim)
    scheduler = NetworkScheduler(net)
    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    sim = Simulation(spec, build_jobs(tables, Scenario(workflows=6, rate=1.0, seed=4)))
    decisions = []
    d = sim.next_decision()
    while d is not None and len(decisions) < 12:
        acting = scheduler.forward(d).logits[0]
        # Training: the environment's observation padded to 16 servers, stacked in a batch
        # with another decision's, as the vector environment hands it to PPO.
        decisions.append(encode(d, 16, server_dim))
        batch = {k: np.stack([v, v]) for k, v in decisions[-1].items()}
        with torch.no_grad():
            training = net(*obs_to_tensors(batch)).logits[0]
        n = d.n_servers
        assert torch.allclose(acting[:n], training[:n], atol=1e-5)
        assert (training[n:] <= -1e8).all()  # padding is never chosen
        sim.apply(int(np.argmax(d.mask)))
        d = sim.next_decision()
    assert len(decisions) == 12
