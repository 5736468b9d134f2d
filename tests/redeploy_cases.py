"""Two hand-built deployments of hetero-8, one move apart, that the redeploy tests of the
decision contract (the diff) and of the simulator (carrying it out) share.

From A to B: codellama-34b moves from a100-0 to a100-1 (an unload and a load), phi-2 on
h100-0 grows from one replica to two (a resize), llama-2-7b and llama-2-70b stay."""

from __future__ import annotations

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import Deployment, deployment_from_dict

SPEC = get_cluster("hetero-8")
H0, A0, H1, A1 = 0, 1, 4, 5  # server indices of h100-0, a100-0, h100-1, a100-1


def deployment(*replicas: tuple[str, str, tuple[int, ...], float]) -> Deployment:
    """A deployment of ``SPEC`` from (model, server, GPUs, share) rows."""
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
