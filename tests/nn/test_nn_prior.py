"""The eft prior of the SCALE network: an untrained network with it places like eft."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import RELATIVE_FINISH_FEATURE, SERVER_FEATURES, TASK_FEATURES
from scalesched.nn import build_network
from scalesched.nn.scale_net import ScaleNetConfig
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation

torch.set_num_threads(1)


def test_an_untrained_network_with_the_prior_agrees_with_eft() -> None:
    torch.manual_seed(0)
    net = build_network(
        "scale", task_dim=TASK_FEATURES, server_dim=SERVER_FEATURES, heuristic_prior=20.0
    )
    plain = build_network("scale", task_dim=TASK_FEATURES, server_dim=SERVER_FEATURES)
    spec = get_cluster("hetero-8")
    tables = ClusterTables(spec)
    sim = Simulation(spec, build_jobs(tables, Scenario(workflows=20, rate=1.0, seed=1)))
    agree = {"prior": 0, "plain": 0}
    decisions = 0
    d = sim.next_decision()
    while d is not None and decisions < 150:
        finish = np.where(d.mask, d.finish_s, np.inf)
        eft = int(np.argmin(finish))  # by estimated finish alone, what the feature encodes
        args = (
            torch.from_numpy(d.task_features.astype(np.float32))[None],
            torch.from_numpy(d.server_features.astype(np.float32))[None],
            torch.from_numpy(np.array(d.mask, dtype=bool))[None],
            torch.tensor([d.n_servers]),
        )
        with torch.no_grad():
            for name, model in (("prior", net), ("plain", plain)):
                pick = int(torch.argmax(model(*args).logits[0]).item())
                agree[name] += int(finish[pick] <= finish[eft] * 1.001)  # ties count
        sim.apply(eft)
        decisions += 1
        d = sim.next_decision()
    assert agree["prior"] >= 0.9 * decisions
    assert agree["plain"] < agree["prior"]


def test_the_prior_adds_one_parameter_and_rejects_bad_settings() -> None:
    base = build_network("scale", task_dim=TASK_FEATURES, server_dim=SERVER_FEATURES)
    prior = build_network(
        "scale", task_dim=TASK_FEATURES, server_dim=SERVER_FEATURES, heuristic_prior=5.0
    )
    count = sum(p.numel() for p in prior.parameters()) - sum(p.numel() for p in base.parameters())
    assert count == 1
    assert ScaleNetConfig(1, SERVER_FEATURES).prior_feature == RELATIVE_FINISH_FEATURE
    with pytest.raises(ValueError, match="heuristic_prior"):
        ScaleNetConfig(TASK_FEATURES, SERVER_FEATURES, heuristic_prior=-1.0)
