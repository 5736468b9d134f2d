"""The deployment diff a ``Redeploy`` is carried out by: loads, unloads, resizes and kept
groups, exactly; and the request refuses tables that are not a deployment's."""

from __future__ import annotations

import pytest

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.redeploy import Redeploy, deployment_diff

SPEC = get_cluster("hetero-8")
H0, A0, H1, A1 = 0, 1, 4, 5  # server indices of h100-0, a100-0, h100-1, a100-1


def deployment(*replicas: tuple[str, str, tuple[int, ...], float]) -> Deployment:
    data = {
        "name": "t",
        "replicas": [
            {"model": m, "server": s, "gpus": list(g), "share": share}
            for m, s, g, share in replicas
        ],
    }
    return deployment_from_dict(data, SPEC, "test")


BASE = (
    ("llama-2-7b", "h100-80g-x4-0", (0,), 1.0),
    ("llama-2-70b", "h100-80g-x4-1", (0, 1, 2, 3), 1.0),
)
A = deployment(
    *BASE,
    ("codellama-34b", "a100-80g-x4-0", (0, 1), 1.0),
    ("phi-2", "h100-80g-x4-0", (1,), 1.0),
)
B = deployment(
    *BASE,
    ("codellama-34b", "a100-80g-x4-1", (0, 1), 1.0),
    ("phi-2", "h100-80g-x4-0", (1,), 1.0),
    ("phi-2", "h100-80g-x4-0", (2,), 1.0),
)


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
