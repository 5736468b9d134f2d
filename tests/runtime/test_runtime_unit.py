"""Runtime parts that need no Ray cluster: the view's bookkeeping, node mapping, fault
draws, the OpenAI-compatible client (against a local HTTP server), the decorator API's
DAG and the CLI's one-line errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.cluster import get_cluster
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.features import (
    ENGINE_ABSENT,
    ENGINE_LOADING,
    ENGINE_READY,
    TaskRequest,
    make_decision,
)
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.runs.setup import Scenario, build_jobs
from scalesched.runtime.agent import FaultConfig, TaskSpec
from scalesched.runtime.api import Workflow, llm, tool, workflow_jobs
from scalesched.runtime.backends import (
    EndpointConfig,
    LlmRequestError,
    OpenAIClient,
    load_endpoints,
)
from scalesched.runtime.cluster import map_servers, node_labels, node_resources
from scalesched.runtime.driver import _union_length
from scalesched.runtime.view import RuntimeView

SPEC = get_cluster("hetero-4")
TABLES = ClusterTables(SPEC)
M7B = MODEL_INDEX["llama-2-7b"]


def test_view_counts_what_it_placed_and_reads_node_snapshots() -> None:
    jobs = build_jobs(TABLES, Scenario(workflows=3, rate=1.0, seed=0))
    view = RuntimeView(TABLES, 0.01, jobs)
    kinds = [view.tasks.task(g) for g in range(view.n_tasks)]
    llm = next(g for g, t in enumerate(kinds) if t.kind == "llm" and t.model == "llama-2-7b")
    tool = next(g for g, t in enumerate(kinds) if t.kind == "tool" and t.cpu_work > 0)
    view.book(llm, 0, 5.0)
    assert view.engine_state[0, M7B] == ENGINE_LOADING  # optimistic: loading from now
    assert view.engine_ready_at[0, M7B] > 0 and view.free_gpus[0] == 4 - TABLES.tp[0, M7B]
    view.book(tool, 3, 2.0)
    assert view.busy_cores[3] == 1 and view.cpu_backlog[3] == kinds[tool].cpu_work
    assert view.server[llm] == 0 and view.n_assigned.sum() == 2
    task = TaskRequest("llm", M7B, 200, 200, 0.0, 0.0, (), (), 1.0, 0.0)
    decision = make_decision(TABLES, view, task)  # the feature module reads the view as is
    assert decision.mask[0] and not decision.mask[3] and decision.load_s[0] > 0
    states = [ENGINE_ABSENT] * len(view.engine_state[0])
    view.update_engines(0, states, 3, 0)  # the node has not seen the request yet
    assert view.engine_state[0, M7B] == ENGINE_LOADING
    states[M7B] = ENGINE_READY
    view.update_engines(0, states, 3, 0)
    assert view.engine_state[0, M7B] == ENGINE_READY
    view.unbook(llm, 0, 5.0)
    view.unbook(tool, 3, 2.0)
    assert view.n_assigned.sum() == 0 and view.est_work.sum() == 0
    assert view.engine_batch.sum() == 0 and view.busy_cores.sum() == 0
    assert view.cpu_backlog.sum() == 0 and view.engine_ctx.sum() == 0
    view.mark_dead(1)
    assert not view.alive[1] and view.alive.sum() == 3


def test_nodes_map_to_servers_by_their_declared_resource() -> None:
    rows = [
        {"NodeID": f"n{i}", "Alive": True, "Resources": node_resources(s)}
        for i, s in enumerate(reversed(SPEC.servers))
    ]
    assert map_servers(SPEC, rows) == ["n3", "n2", "n1", "n0"]
    assert node_labels(SPEC.servers[0])["scalesched.io/type"] == "h100-80g-x4"
    assert "scalesched_model:llama-2-70b" not in node_resources(SPEC.servers[3])
    rows[0]["Alive"] = False
    with pytest.raises(InputError, match="cpu-64c-0"):
        map_servers(SPEC, rows)


def test_injected_faults_are_reproducible() -> None:
    spec = TaskSpec(1, "t", 0, "tool", None, 0, 0, 0.1, 0.0, ())
    cfg = FaultConfig(fail_rate=0.5, seed=7)
    draws = [
        cfg.fails(TaskSpec(w, "t", a, "tool", None, 0, 0, 0.1, 0.0, ()))
        for w in range(50)
        for a in range(2)
    ]
    assert draws == [
        cfg.fails(TaskSpec(w, "t", a, "tool", None, 0, 0, 0.1, 0.0, ()))
        for w in range(50)
        for a in range(2)
    ]
    assert 30 < sum(draws) < 70
    assert not FaultConfig().fails(spec)
    assert FaultConfig(fail_tasks=frozenset({(1, "t")})).fails(spec)


def test_union_of_busy_spans() -> None:
    assert _union_length([(0, 2), (1, 3), (5, 6)]) == 4
    assert _union_length([]) == 0


class _Server(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Server.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if body["model"] == "broken":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"boom")
            return
        if self.path.endswith("/completions") and "prompt" in body:
            reply: dict[str, Any] = {"choices": [{"text": "plain"}]}
        else:
            reply = {
                "choices": [{"message": {"content": "chat"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1},
            }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture()
def http_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{{node_ip}}:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_client_chat_completions_and_errors(
    http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sekrit")
    chat = OpenAIClient(
        EndpointConfig(http_url, "m", api_key_env="TEST_LLM_KEY", extra={"ignore_eos": True}),
        node_ip="127.0.0.1",
    )
    out = chat.complete("hello", 5)
    assert out == {"text": "chat", "prompt_tokens": 3, "completion_tokens": 1}
    last = _Server.seen[-1]
    assert last["path"] == "/v1/chat/completions" and last["auth"] == "Bearer sekrit"
    assert last["ignore_eos"] is True and last["max_tokens"] == 5
    plain = OpenAIClient(EndpointConfig(http_url, "m", api="completions"), node_ip="127.0.0.1")
    assert plain.complete("hi", 2)["text"] == "plain"
    assert _Server.seen[-1]["path"] == "/v1/completions"
    broken = OpenAIClient(EndpointConfig(http_url, "broken"), node_ip="127.0.0.1")
    with pytest.raises(LlmRequestError, match="HTTP 500"):
        broken.complete("x", 1)
    gone = OpenAIClient(EndpointConfig("http://127.0.0.1:9/v1", "m", timeout_s=2))
    with pytest.raises(LlmRequestError, match="127.0.0.1:9"):
        gone.complete("x", 1)


def test_endpoint_files_are_validated(tmp_path: Path) -> None:
    good = tmp_path / "ep.yaml"
    good.write_text("llama-2-7b:\n  base_url: http://{node_ip}:8000/v1\n  api: completions\n")
    assert load_endpoints(good)["llama-2-7b"].api == "completions"
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpt-9:\n  base_url: x\n")
    with pytest.raises(InputError, match="gpt-9"):
        load_endpoints(bad)
    bad.write_text("llama-2-7b:\n  api: chat\n")
    with pytest.raises(InputError, match="base_url"):
        load_endpoints(bad)


@tool(cpu_work=0.5, ext_latency=1.0)
def search(q: str) -> str:
    return q.upper()


@llm(model="phi-2", prompt_tokens=100, output_tokens=10)
def ask(a: str, b: str) -> str:
    return a + b


def test_decorated_calls_build_a_dag() -> None:
    with Workflow("w") as wf:
        a = search("x")
        b = search("y")
        ask(a, b)
    inst = wf.instance()
    assert [t.id for t in inst.tasks] == ["search", "search-1", "ask"]
    assert inst.parents == ((), (), (0, 1)) and inst.children == ((2,), (2,), ())
    assert inst.tasks[0].cpu_work == 0.5 and inst.tasks[2].model == "phi-2"
    jobs, programs = workflow_jobs([wf], [3.0])
    assert jobs[0].arrival == 3.0 and programs[0][2].args[0].index == 0
    assert search("z") == "Z"
    with pytest.raises(InputError, match="top-level"), Workflow("nested"):
        ref = search("x")
        ask([ref], "y")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown model"):
        llm(model="gpt-9")


def test_run_needs_exactly_one_of_local_and_address() -> None:
    runner = CliRunner()
    for args in (["run"], ["run", "--local", "--address", "x:1"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2
        assert result.stderr.strip().count("\n") == 0 and "--local/--address" in result.stderr
    result = runner.invoke(app, ["run", "--local", "--time-scale", "0"])
    assert result.exit_code == 2 and "time_scale" in result.stderr


def test_runtime_accepts_every_policy_contract() -> None:
    from scalesched.runtime.driver import Driver, RuntimeConfig

    with pytest.raises(ValueError, match="vehicle"):
        Driver(SPEC, [], None, RuntimeConfig(placement="ray"))
    with pytest.raises(InputError, match="time_scale"):
        Driver(SPEC, [], get_policy("eft"), RuntimeConfig(time_scale=0))
    assert np.isfinite(Driver(SPEC, [], get_policy("eft")).view.now)
