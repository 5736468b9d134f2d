"""The deployment diff a ``Redeploy`` is carried out by: loads, unloads, resizes and kept
groups, exactly; and the request refuses tables that are not a deployment's."""

from __future__ import annotations

import pytest
from redeploy_cases import A0, A1, H0, H1, SPEC, A, B

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.redeploy import Redeploy, deployment_diff


def test_diff_names_every_group_once():
    diff = deployment_diff(ClusterTables(SPEC, A), ClusterTables(SPEC, B))
    assert diff.loads == ((A1, "codellama-34b"),)
    assert diff.unloads == ((A0, "codellama-34b"),)
    assert diff.resizes == ((H0, "phi-2"),)
    assert diff.kept == ((H0, "llama-2-7b"), (H1, "llama-2-70b"))
    assert not diff.empty


def test_diff_back_is_the_mirror_and_same_is_empty():
    back = deployment_diff(ClusterTables(SPEC, B), ClusterTables(SPEC, A))
    assert back.loads == ((A0, "codellama-34b"),) and back.unloads == ((A1, "codellama-34b"),)
    assert deployment_diff(ClusterTables(SPEC, A), ClusterTables(SPEC, A)).empty


def test_diff_and_request_refuse_what_is_not_a_deployment():
    with pytest.raises(ValueError, match="deployment"):
        Redeploy(ClusterTables(SPEC))
    with pytest.raises(ValueError, match="two deployments"):
        deployment_diff(ClusterTables(SPEC), ClusterTables(SPEC, A))
    other = get_cluster("hetero-16")
    from scalesched.runs.world import plan_deployment

    plan = plan_deployment(other, "agentic-mix", 2.0)
    with pytest.raises(ValueError, match="same cluster"):
        deployment_diff(ClusterTables(SPEC, A), ClusterTables(other, plan))
