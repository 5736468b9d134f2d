"""Deployment files: validation against a cluster, schema, and the replica cost model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import (
    deployment_from_dict,
    deployment_schema,
    deployment_schema_json,
    load_deployment_file,
)
from scalesched.cluster.perf import (
    allreduce_provenance,
    allreduce_s,
    engine_perf,
    replica_fits,
    replica_group_perf,
)
from scalesched.errors import InputError

REPO = Path(__file__).resolve().parents[2]
CLUSTER = get_cluster("hetero-8")


def _dep(*replicas: dict) -> dict:
    return {"name": "t", "replicas": list(replicas)}


def _r(model: str = "llama-2-7b", server: str = "h100-80g-x4-0", gpus=(0,), share=1.0) -> dict:
    return {"model": model, "server": server, "gpus": list(gpus), "share": share}


def test_valid_deployment_groups_replicas(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text(
        yaml.safe_dump(
            _dep(
                _r(gpus=(0,), share="1/2"),
                _r(gpus=(0,), share=0.5),
                _r("llama-2-70b", gpus=(2, 3)),
                _r("phi-2", server="a100-80g-x4-0", gpus=(1,), share=0.25),
            )
        )
    )
    dep = load_deployment_file(path, CLUSTER)
    assert len(dep.replicas) == 4 and dep.gpus_used == 0.5 + 0.5 + 2 + 0.25
    g = dep.engine_at(0, "llama-2-7b")
    assert g is not None and (g.count, g.share, g.tp, g.gpus) == (2, 0.5, 1, 1.0)
    assert dep.engine_at(1, "llama-2-7b") is None
    assert dep.models() == {"llama-2-7b", "llama-2-70b", "phi-2"}


@pytest.mark.parametrize(
    ("replicas", "field", "words"),
    [
        ([_r("gpt-5")], "replicas[0].model", "unknown model"),
        ([_r(server="nope-0")], "replicas[0].server", "no server"),
        ([_r(server="cpu-64c-0")], "replicas[0].server", "no GPUs"),
        ([_r(gpus=(0, 1, 2))], "replicas[0].gpus", "tp must be"),
        ([_r(gpus=(0, 0))], "replicas[0].gpus", "repeated"),
        ([_r(gpus=(4,))], "replicas[0].gpus", "out of range"),
        ([_r(share=0.3)], "replicas[0].share", "share"),
        ([_r(share="1/3")], "replicas[0].share", "share"),
        ([_r("llama-2-70b", gpus=(0,))], "replicas[0].gpus", "does not fit"),
        ([_r("codellama-34b", share=0.5)], "replicas[0].gpus", "does not fit"),
        ([_r(), _r(share=0.5)], "replicas[1].gpus", "oversubscribed"),
        ([_r(gpus=(0,)), _r(gpus=(1, 2))], "replicas[1].gpus", "must share tp"),
        ([{"model": "phi-2", "server": "h100-80g-x4-0"}], "replicas[0].gpus", "Field required"),
        ([{**_r(), "color": 1}], "replicas[0].color", "Extra inputs"),
    ],
)
def test_bad_deployments_name_the_field(replicas, field, words):
    with pytest.raises(InputError) as err:
        deployment_from_dict(_dep(*replicas), CLUSTER, "d.yaml")
    assert err.value.source == "d.yaml" and err.value.field == field
    assert words in err.value.message and "\n" not in str(err.value)


def test_cluster_name_must_match_and_file_errors(tmp_path):
    with pytest.raises(InputError, match="made for cluster"):
        deployment_from_dict({**_dep(_r()), "cluster": "hetero-16"}, CLUSTER, "d.yaml")
    with pytest.raises(InputError, match="no such deployment file"):
        load_deployment_file(tmp_path / "missing.yaml", CLUSTER)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match="malformed YAML"):
        load_deployment_file(bad, CLUSTER)


def test_schema_file_is_current():
    committed = (REPO / "docs" / "deployment-schema.json").read_text()
    assert committed == deployment_schema_json(), (
        "stale: python -m scalesched.cluster.deployment > docs/deployment-schema.json"
    )
    assert json.loads(committed) == deployment_schema()


def test_allreduce_table():
    assert "7d47513" in allreduce_provenance()["network_profiles"]
    assert allreduce_s("H100-80G", 1, 1e6) == 0.0
    for gpu in ("H100-80G", "A100-80G", "L4-24G"):
        for tp in (2, 4, 8):
            times = [allreduce_s(gpu, tp, n) for n in (1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9)]
            assert times == sorted(times) and times[0] > 0
    # NVLink beats the assumed PCIe ring on large messages
    assert allreduce_s("H100-80G", 4, 64e6) < allreduce_s("L4-24G", 4, 64e6) / 5


def test_replica_group_cost_model():
    base = engine_perf("llama-2-70b", "H100-80G", 2)
    one = replica_group_perf("llama-2-70b", "H100-80G", 2, 1.0)
    # tp 2 pays its all-reduces: slower than the profile-only engine, by a few percent
    assert (
        base.decode_step_s(8, 8000) < one.decode_step_s(8, 8000) < 1.2 * base.decode_step_s(8, 8000)
    )
    assert one.kv_capacity_tokens == base.kv_capacity_tokens
    # tp 1 and a whole GPU: exactly the engine
    e7 = engine_perf("llama-2-7b", "A100-80G", 1)
    r7 = replica_group_perf("llama-2-7b", "A100-80G", 1, 1.0)
    assert r7.prefill_s(1000) == e7.prefill_s(1000)
    assert r7.decode_step_s(5, 3000) == pytest.approx(e7.decode_step_s(5, 3000))
    # half a GPU: twice the time, less KV memory
    half = replica_group_perf("llama-2-7b", "A100-80G", 1, 0.5)
    assert half.prefill_s(1000) == pytest.approx(2 * e7.prefill_s(1000))
    assert half.kv_capacity_tokens < e7.kv_capacity_tokens / 2
    # two replicas: a batch of 2 takes one replica's batch-1 step
    two = replica_group_perf("llama-2-7b", "A100-80G", 1, 1.0, 2)
    assert two.decode_step_s(2, 2000) == pytest.approx(e7.decode_step_s(1, 1000))
    assert two.kv_capacity_tokens == 2 * e7.kv_capacity_tokens
    assert not replica_fits("llama-2-70b", "L4-24G", 4, 1.0)
    assert replica_fits("phi-2", "L4-24G", 1, 0.5) and not replica_fits("phi-2", "L4-24G", 1, 0.25)
    with pytest.raises(InputError):
        replica_group_perf("llama-2-7b", "A100-80G", 1, 0.3)


def _sim_deployment():
    return deployment_from_dict(
        _dep(
            _r("llama-2-70b", gpus=(0, 1)),
            _r("llama-2-7b", gpus=(2,), share=0.5),
            _r("phi-2", gpus=(2,), share=0.25),
            _r("codellama-34b", server="a100-80g-x4-0", gpus=(0, 1)),
            _r("llama-2-7b", server="a100-80g-x4-0", gpus=(2,)),
            _r("llama-2-7b", server="a100-80g-x4-0", gpus=(3,)),
        ),
        CLUSTER,
        "d.yaml",
    )


@pytest.mark.parametrize("policy", ["eft", "least_loaded", "round_robin", "scale"])
def test_simulation_follows_the_deployment(policy):
    from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
    from scalesched.policies import get_policy
    from scalesched.runs.setup import Scenario, build_jobs
    from scalesched.sim.run import simulate

    dep = _sim_deployment()
    tables = ClusterTables(CLUSTER, dep)
    assert tables.pinned
    names = [s.name for s in CLUSTER.servers]
    homes = {(names.index(r.server), r.model) for r in dep.replicas}
    assert {
        (int(s), m) for m in MODEL_INDEX for s in tables.feasible[:, MODEL_INDEX[m]].nonzero()[0]
    } == homes
    jobs = build_jobs(ClusterTables(CLUSTER), Scenario(workflows=40, load=0.5, seed=3))
    res = simulate(CLUSTER, jobs, get_policy(policy), tables=tables, record_trace=True)
    assert res.metrics["workflows_completed"] == 40 and res.metrics["model_loads"] == 0
    llm = [r for r in res.trace if r.kind == "llm"]
    assert llm and all((r.server, r.model) in homes for r in llm)
    assert 0 < res.metrics["mean_gpu_utilization"] <= 1


def test_undeployed_model_is_an_input_error():
    from scalesched.cluster.tables import ClusterTables
    from scalesched.kernel.records import check_feasible
    from scalesched.runs.setup import Scenario, build_jobs

    dep = deployment_from_dict(_dep(_r("llama-2-7b")), CLUSTER, "d.yaml")
    jobs = build_jobs(ClusterTables(CLUSTER), Scenario(workflows=5, seed=0))
    with pytest.raises(InputError, match="no server can run model"):
        check_feasible(ClusterTables(CLUSTER, dep), jobs)


def test_runtime_agent_and_view_pin_the_deployment():
    """The Ray runtime's server agent and the driver's view start with the replicas resident
    (no Ray needed: both are plain classes)."""
    from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
    from scalesched.decision.features import ENGINE_ABSENT, ENGINE_READY
    from scalesched.runtime.agent import ServerAgent
    from scalesched.runtime.view import RuntimeView

    dep = _sim_deployment()
    agent = ServerAgent(CLUSTER, 0, 0.01, deployment=dep)
    assert {MODEL_INDEX[m] for m in ("llama-2-70b", "llama-2-7b", "phi-2")} == set(agent.engines)
    assert all(e.state == ENGINE_READY and e.ready.is_set() for e in agent.engines.values())
    assert agent.model_loads == 0
    view = RuntimeView(ClusterTables(CLUSTER, dep), 0.01)
    assert view.engine_state[0, MODEL_INDEX["phi-2"]] == ENGINE_READY
    assert view.engine_state[0, MODEL_INDEX["codellama-34b"]] == ENGINE_ABSENT
    assert view.free_gpus[0] == pytest.approx(4 - 2 - 0.5 - 0.25)
    plain = ServerAgent(CLUSTER, 0, 0.01)
    assert plain.engines == {}
