"""A fleet and a gateway that run one deployment: the engines ``simulate --deployment``
runs, so that live and simulated runs compare like with like."""

from __future__ import annotations

import pytest
import yaml

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import Deployment, deployment_from_dict
from scalesched.cluster.endpoints import backends_from_dict
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.errors import InputError
from scalesched.serve.engine import EngineServer, backends_yaml, fleet_servers
from scalesched.serve.state import GatewayState

PLAN = {
    "name": "t",
    "cluster": "hetero-8",
    "replicas": [
        {"model": "llama-2-7b", "server": "h100-80g-x4-0", "gpus": [0], "share": 0.5},
        {"model": "phi-2", "server": "h100-80g-x4-0", "gpus": [0], "share": 0.5},
        {"model": "llama-2-70b", "server": "h100-80g-x4-0", "gpus": [2, 3]},
        {"model": "llama-2-7b", "server": "a100-80g-x4-0", "gpus": [0]},
        {"model": "llama-2-7b", "server": "a100-80g-x4-0", "gpus": [1]},
    ],
}


def _plan() -> tuple[Deployment, ClusterTables]:
    spec = get_cluster("hetero-8")
    deployment = deployment_from_dict(PLAN, spec, "plan.yaml")
    return deployment, ClusterTables(spec, deployment)


def _backends(plan: list, drop: str | None = None) -> list:
    entries = [(s, m, f"http://127.0.0.1:{18000 + i}/v1") for i, (s, m) in enumerate(plan)]
    data = yaml.safe_load(backends_yaml(entries))
    if drop is not None:
        data["backends"][0]["models"].pop(drop)
    return backends_from_dict(data, "fleet")


def test_the_fleet_runs_exactly_the_deployments_replicas_with_their_engines():
    deployment, tables = _plan()
    plan = fleet_servers(tables.spec, None, deployment)
    assert [(s.name, sorted(m)) for s, m in plan] == [
        ("h100-80g-x4-0", ["llama-2-70b", "llama-2-7b", "phi-2"]),
        ("a100-80g-x4-0", ["llama-2-7b"]),
    ]
    a100 = EngineServer(plan[1][0], plan[1][1], 1.0, tables)
    h100 = EngineServer(plan[0][0], plan[0][1], 1.0, tables)
    # Two replicas of llama-2-7b on the a100 serve as one group: twice one GPU's KV memory.
    single = EngineServer(plan[1][0], plan[1][1], 1.0)
    group = a100.models["llama-2-7b"].batch
    assert group.kv_cap == 2 * single.models["llama-2-7b"].batch.kv_cap
    # Half a GPU decodes each step twice as slowly as the whole GPU would.
    half = h100.models["llama-2-7b"].batch
    whole = EngineServer(plan[0][0], {"llama-2-7b": "llama-2-7b"}, 1.0).models["llama-2-7b"]
    for batch in (half, whole.batch):
        batch.admit(100, 100)
        batch.start_decoding(100, 100)
    assert half.step_s() == pytest.approx(2 * whole.batch.step_s(), rel=0.01)


def test_the_gateway_decides_on_the_deployments_engines():
    deployment, tables = _plan()
    backends = _backends(fleet_servers(tables.spec, None, deployment))
    state = GatewayState(backends, deployment=deployment)
    m = MODEL_INDEX["llama-2-7b"]
    assert state.tables.pinned
    assert (
        state.tables.kv_capacity[state.tables.engine_class[1, m]]
        == tables.kv_capacity[tables.engine_class[tables.names.index("a100-80g-x4-0"), m]]
    )
    assert state.tables.tp[0, m] == 0.5  # half of one GPU
    assert not state.tables.feasible[1, MODEL_INDEX["phi-2"]]  # no phi-2 replica there


def test_a_deployment_and_backends_that_disagree_are_refused_naming_the_field():
    deployment, tables = _plan()
    plan = fleet_servers(tables.spec, None, deployment)
    with pytest.raises(InputError, match=r"replicas\[3\]\.server.*no backend"):
        GatewayState(_backends(plan[:1]), deployment=deployment)
    extra = [(plan[0][0], {**plan[0][1], "codellama-34b": "codellama-34b"}), plan[1]]
    with pytest.raises(InputError, match=r"backends\[0\]\.models\.codellama-34b"):
        GatewayState(_backends(extra), source="b.yaml", deployment=deployment)
