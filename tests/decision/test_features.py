"""Decision's public surface for ablations: the server features a learned policy reads can
be replaced for one decision, with their shape checked."""

from __future__ import annotations

import numpy as np
import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.features import CACHED_SHARE_FEATURE, SERVER_FEATURES, Decision
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.sim.engine import Simulation


def _first_decision() -> Decision:
    spec = get_cluster("hetero-4")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workload="agentic-mix", workflows=2, rate=1.0, seed=0))
    d = Simulation(spec, jobs, tables=tables).next_decision()
    assert d is not None
    return d


def test_replaced_server_features_are_what_the_decision_shows() -> None:
    d = _first_decision()
    built = d.server_features.copy()
    ablated = built.copy()
    ablated[:, CACHED_SHARE_FEATURE:] = 0.0
    d.server_features = ablated
    assert d.server_features is ablated
    assert np.array_equal(
        d.server_features[:, :CACHED_SHARE_FEATURE], built[:, :CACHED_SHARE_FEATURE]
    )


def test_replaced_server_features_must_keep_the_shape() -> None:
    d = _first_decision()
    with pytest.raises(ValueError, match=f"\\({d.n_servers}, {SERVER_FEATURES}\\)"):
        d.server_features = np.zeros((d.n_servers, SERVER_FEATURES - 1))
