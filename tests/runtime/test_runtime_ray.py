"""The runtime on a real multi-node local Ray cluster: one cluster for the whole module
(head + 3 server nodes, ~10 s to start), time scale 0.01-0.02 so runs take seconds.

The node-death test runs last: it kills a node of the shared cluster.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")

from typer.testing import CliRunner  # noqa: E402

from scalesched.cli import app  # noqa: E402
from scalesched.cluster import cluster_to_yaml, get_cluster  # noqa: E402
from scalesched.cluster.model import ClusterSpec  # noqa: E402
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables  # noqa: E402
from scalesched.decision.actions import Defer, Hedge  # noqa: E402
from scalesched.decision.features import Decision  # noqa: E402
from scalesched.decision.scheduler import BaseScheduler  # noqa: E402
from scalesched.kernel.metrics import RunRecord, run_metrics  # noqa: E402
from scalesched.policies import get_policy  # noqa: E402
from scalesched.runs.setup import Scenario, build_jobs  # noqa: E402
from scalesched.runs.world import plan_deployment  # noqa: E402
from scalesched.runtime import FaultConfig, RuntimeConfig, run_jobs  # noqa: E402
from scalesched.runtime.api import Workflow, llm, run_workflows, tool  # noqa: E402
from scalesched.runtime.backends import EndpointConfig  # noqa: E402
from scalesched.runtime.cluster import LocalCluster, start_local_cluster  # noqa: E402

_H4 = get_cluster("hetero-4")
SPEC = ClusterSpec("rt-test-3", (_H4.servers[0], _H4.servers[1], _H4.servers[3]))
"""An H100 server, an A100 server and a CPU server: either GPU server runs every model."""
TABLES = ClusterTables(SPEC)
FAST = RuntimeConfig(time_scale=0.01)


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_USAGE_STATS_ENABLED")}
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    lc = start_local_cluster(SPEC, tmp_path_factory.mktemp("ray"), object_store_mb=80)
    try:
        yield lc
    finally:
        lc.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def jobs_for(n: int, seed: int = 0) -> list[Any]:
    return build_jobs(TABLES, Scenario(workflows=n, seed=seed))


def sim_keys() -> set[str]:
    empty = np.zeros(1)
    rec = RunRecord("p", "c", empty, empty, 1.0, empty, empty, empty > 0, empty, 0, 0, 0, 0, 0, 0)
    # both executors' ledgers record the world-independent bound as well
    rec = dataclasses.replace(rec, any_deployment_bounds=empty)
    return set(run_metrics(rec))


def test_eft_runs_every_workflow_with_the_simulators_metrics(ray_cluster: LocalCluster) -> None:
    from scalesched.eval.fidelity import fidelity

    jobs = jobs_for(8)
    result = run_jobs(SPEC, jobs, get_policy("eft"), RuntimeConfig(time_scale=0.02), tables=TABLES)
    m = result.metrics
    assert set(m) == sim_keys() | {"workflows_failed"}
    assert m["workflows_completed"] == 8 and m["workflows_failed"] == 0
    n_tasks = sum(len(j.workflow.tasks) for j in jobs)
    assert m["tasks_completed"] == m["decisions"] == n_tasks == len(result.trace)
    for rec in result.trace:  # every LLM task ran where its model fits, in order
        if rec.kind == "llm":
            assert TABLES.feasible[rec.server, MODEL_INDEX[rec.model or ""]]
        assert rec.ready <= rec.landed + 1e-6 and rec.landed <= rec.start <= rec.end
    assert (result.response_times >= result.lower_bounds * 0.99).all()
    # Each tool holds a core for cpu_work / core_speed, then waits ext_latency: its measured
    # duration is the cost model's plus the sleeps' overshoot, which a loaded machine only
    # lengthens (the agent sleeps again when uvloop's timer wakes it early), so no tool
    # measures short of its model time: the fastest shows the time scale (1.05 measured, the
    # median 1.26 beside a simulator process), and a scale misapplied by 1.5x either way
    # (0.67 or 1.5) fails here.
    spec_of = {(j.workflow_id, t.id): t for j in jobs for t in j.workflow.tasks}
    ratios = []
    for rec in (r for r in result.trace if r.kind == "tool"):
        task = spec_of[rec.workflow, rec.task]
        expected = task.cpu_work / TABLES.core_speed[rec.server] + task.ext_latency
        if expected > 0:
            ratios.append((rec.end - rec.start) / expected)
    assert len(ratios) >= 8 and 0.99 < min(ratios) < 1.25, sorted(ratios)
    fid = fidelity(SPEC, jobs, get_policy("eft"), m, result.response_times, tables=TABLES)
    # Measured / simulated response time. Ray round trips only add time (2-5 ms of wall per
    # task, i.e. 0.1-0.25 model s at this time scale, on a critical path of about ten tasks;
    # 1.11 at 50 workflows in docs/runtime.md), and the simulator's batching differs from
    # the runtime's by a few percent either way, so the ratio sits a little above 1 on a
    # quiet machine; on a loaded one the round trips grow (1.42-1.83 measured beside two
    # simulator processes), hence the loose upper bound: the per-task check above is the
    # time scale's test, this one catches a runtime that finishes faster than the model.
    assert 0.95 < fid["avg_response_time_ratio"] < 2.5, fid
    assert 0.95 < fid["makespan_ratio"] < 2.5, fid


def test_cli_run_with_a_checkpoint_prints_the_simulate_json(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    import torch

    from scalesched.decision.features import SERVER_FEATURES, TASK_FEATURES
    from scalesched.nn import build_network
    from scalesched.nn.checkpoint import save_checkpoint

    torch.manual_seed(0)
    net = build_network("scale", TASK_FEATURES, SERVER_FEATURES)
    ckpt = tmp_path / "tiny.pt"
    save_checkpoint(
        ckpt,
        {
            "network": "scale",
            "state_dict": net.state_dict(),
            "network_config": {"task_dim": TASK_FEATURES, "server_dim": SERVER_FEATURES},
            "metadata": {"name": "tiny-scale"},
        },
    )
    cluster_file = tmp_path / "rt-test-3.yaml"
    cluster_file.write_text(cluster_to_yaml(SPEC))
    trace = tmp_path / "trace.jsonl"
    args = ["run", "--cluster", str(cluster_file), "--address", ray_cluster.address]
    args += ["--policy", str(ckpt), "--workflows", "4", "--time-scale", "0.01", "--json"]
    args += ["--trace", str(trace), "--rate", "0.5"]  # planned for directly: no capacity search
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    metrics = json.loads(out.stdout)
    assert set(metrics) == sim_keys() | {"workflows_failed", "world", "deployment", "world_note"}
    assert metrics["policy"] == str(ckpt)  # a local checkpoint is named by its path
    assert metrics["workflows_completed"] == 4 and metrics["workflows_failed"] == 0
    plan = plan_deployment(SPEC, "agentic-mix", 0.5)  # the run's plan, from the cache
    assert (metrics["world"], metrics["deployment"]) == ("planned", plan.name)
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    assert len(rows) == metrics["tasks_completed"]
    assert {r["server"] for r in rows} <= set(TABLES.names)
    placed = {(r.server, r.model) for r in plan.replicas}
    llm = [r for r in rows if r.get("model")]
    assert llm and all((r["server"], r["model"]) in placed for r in llm)  # only on its replicas


def test_failing_tasks_are_retried_then_fail_their_workflow(ray_cluster: LocalCluster) -> None:
    jobs = jobs_for(6, seed=3)
    doomed = (jobs[2].workflow_id, jobs[2].workflow.tasks[0].id)
    faults = FaultConfig(fail_rate=0.15, seed=1, fail_tasks=frozenset({doomed}))
    cfg = RuntimeConfig(time_scale=0.01, max_retries=3, faults=faults)
    result = run_jobs(SPEC, jobs, get_policy("least_loaded"), cfg, tables=TABLES)
    m = result.metrics
    assert m["workflows_completed"] + m["workflows_failed"] == m["workflows_submitted"] == 6
    assert m["workflows_failed"] >= 1 and result.retries > 0
    failed = {f.workflow: f for f in result.failures}
    assert failed[doomed[0]].task == doomed[1]
    assert "injected failure" in failed[doomed[0]].error
    assert "after 4 attempts" in failed[doomed[0]].error
    assert np.isnan(result.response_times[[j.workflow_id for j in jobs].index(doomed[0])])


@tool(cpu_work=0.05)
def fetch(query: str) -> list[str]:
    return [f"{query}-a", f"{query}-b"]


@tool(cpu_work=0.05)
def flaky_count(docs: list[str], marker: str) -> int:
    path = Path(marker)
    if not path.exists():  # the first attempt fails, the retry succeeds
        path.write_text("seen")
        raise RuntimeError("flaky tool")
    return len(docs)


@llm(model="llama-2-7b", prompt_tokens=64, output_tokens=16)
def summarise(docs: list[str], count: int) -> str:
    return f"Summarise {count} docs: {docs}"


def test_python_workflows_run_for_real_with_values_between_nodes(
    ray_cluster: LocalCluster, tmp_path: Path
) -> None:
    flows = []
    for k in range(2):
        with Workflow(f"py-{k}") as wf:
            docs = fetch(f"q{k}")
            count = flaky_count(docs, str(tmp_path / f"marker-{k}"))
            summarise(docs, count)
        flows.append(wf)
    result = run_workflows(SPEC, flows, get_policy("eft"), FAST, arrivals=[0.0, 0.5])
    assert result.metrics["workflows_completed"] == 2, result.failures
    assert result.retries == 2
    assert result.outputs[0] == {"summarise": "[emulated llama-2-7b: 16 tok]"}
    assert fetch("x") == ["x-a", "x-b"]  # outside a Workflow block: a plain function


class _FakeOpenAI(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeOpenAI.requests.append({"path": self.path, **body})
        reply = {
            "choices": [{"message": {"role": "assistant", "content": "forty-two"}}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


def test_llm_tasks_call_an_openai_compatible_endpoint(ray_cluster: LocalCluster) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        endpoints = {"llama-2-7b": EndpointConfig(base_url=url, served_model="tiny-llm")}
        cfg = RuntimeConfig(time_scale=0.01, llm_backend="http", endpoints=endpoints)
        with Workflow("ask") as wf:
            docs = fetch("meaning")
            summarise(docs, 2)
        result = run_workflows(SPEC, [wf], get_policy("eft"), cfg)
    finally:
        server.shutdown()
        server.server_close()
    assert result.metrics["workflows_completed"] == 1, result.failures
    assert result.outputs[0]["summarise"]["text"] == "forty-two"
    req = _FakeOpenAI.requests[-1]
    assert req["path"] == "/v1/chat/completions" and req["model"] == "tiny-llm"
    assert req["max_tokens"] == 16
    assert "meaning-a" in req["messages"][0]["content"]


def test_ray_default_placement_runs_the_same_emulation(ray_cluster: LocalCluster) -> None:
    jobs = jobs_for(2, seed=5)
    cfg = RuntimeConfig(time_scale=0.01, vehicle="task", placement="ray")
    result = run_jobs(SPEC, jobs, None, cfg, tables=TABLES)
    m = result.metrics
    assert m["workflows_completed"] == 2 and m["decisions"] == 0
    assert m["policy"] == "ray-default"
    for rec in result.trace:
        if rec.kind == "llm":
            assert SPEC.servers[rec.server].gpus > 0


def test_study_runs_spread_over_ray_give_the_serial_rows(ray_cluster: LocalCluster) -> None:
    from scalesched.eval.study import StudyConfig, run_one, run_specs
    from scalesched.eval.windows import ANY_BOUNDS, BOUNDS, SERIES
    from scalesched.runtime.scaleout import run_on_ray

    cfg = StudyConfig(policies=("eft", "random"), nodes=(4,), seeds=(0,), workflows=5)
    serial = [run_one(spec) for spec in run_specs(cfg)]
    done: list[int] = []
    on_ray = run_on_ray(run_one, run_specs(cfg), on_done=lambda k, _n: done.append(k))
    assert done == [1, 2]
    on_ray.sort(key=lambda r: cfg.policies.index(r["policy"]))
    for a, b in zip(serial, on_ray, strict=True):
        a.pop("sim_wall_time_s")
        b.pop("sim_wall_time_s")
        for key in (SERIES, BOUNDS, ANY_BOUNDS):  # per-workflow arrays, compared as arrays
            assert np.array_equal(a.pop(key), b.pop(key), equal_nan=True)
        assert a == b


class HedgeAndDefer(BaseScheduler):
    """Hedges every task on its two best servers by estimated finish, and defers half of the
    decisions that may be deferred (seeded)."""

    name = "hedge-defer"

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def select(self, decision: Decision) -> int | Hedge | Defer:
        if decision.can_defer and self.rng.random() < 0.5:
            return Defer()
        finish = np.where(decision.mask, decision.finish_s, np.inf)
        best = [int(s) for s in np.argsort(finish)[:2] if np.isfinite(finish[s])]
        return Hedge(tuple(best)) if len(best) == 2 else best[0]


def test_hedged_copies_race_and_deferred_tasks_run(ray_cluster: LocalCluster) -> None:
    import ray

    from scalesched.runtime.driver import Driver

    jobs = jobs_for(4, seed=2)
    n_tasks = sum(len(j.workflow.tasks) for j in jobs)
    driver = Driver(SPEC, jobs, HedgeAndDefer(), RuntimeConfig(time_scale=0.01), tables=TABLES)
    driver.connect()
    try:
        result = driver.run()
        held = ray.get([a.in_use.remote() for a in driver._agents], timeout=30)
    finally:
        driver.close()
    m = result.metrics
    assert m["workflows_completed"] == 4 and m["workflows_failed"] == 0
    # Each task's result is produced once, by one copy, on a server the policy chose.
    assert m["tasks_completed"] == m["decisions"] == n_tasks == len(result.trace)
    assert len({(r.workflow, r.task) for r in result.trace}) == n_tasks
    assert 0 < m["hedged_tasks"] <= n_tasks and m["extra_server_seconds"] > 0
    assert m["deferrals"] > 0 and not driver.view.deferred
    # Cancelled copies gave back what they held, on the nodes and in the view.
    assert all(h == dict.fromkeys(h, 0) for h in held), held
    assert driver.view.n_assigned.sum() == 0 and driver.view.engine_batch.sum() == 0


def test_a_node_dying_mid_run_loses_no_workflow(ray_cluster: LocalCluster) -> None:
    """Runs last: it kills the H100 node of the shared cluster."""
    jobs = jobs_for(10, seed=1)
    killed: list[float] = []

    def kill_h100_when_busy(driver: Any) -> None:
        if not killed and driver.view.tasks_completed >= 15 and driver.view.n_assigned[0] >= 2:
            killed.append(driver.view.now)
            ray_cluster.kill_server(0)

    cfg = RuntimeConfig(time_scale=0.02)
    result = run_jobs(
        SPEC, jobs, get_policy("eft"), cfg, tables=TABLES, on_task_done=kill_h100_when_busy
    )
    m = result.metrics
    assert killed, "the H100 node never had work in flight"
    assert result.dead_servers == [SPEC.servers[0].name]
    assert result.replaced >= 2
    assert m["workflows_completed"] + m["workflows_failed"] == m["workflows_submitted"] == 10
    assert m["workflows_failed"] == 0  # the A100 server runs every model
    lost_at = result.lost_at[SPEC.servers[0].name]
    assert all(r.start < lost_at for r in result.trace if r.server == 0)
    assert any(r.server == 1 and r.start > lost_at for r in result.trace)
