"""The fleet's backends file, and what the gateway reads off a backend's /metrics."""

from __future__ import annotations

import asyncio

import yaml
from aiohttp import web
from conftest import Prefer

from scalesched.cluster import get_cluster
from scalesched.cluster.endpoints import BackendEntry, EndpointSettings, backends_from_dict
from scalesched.cluster.tables import MODEL_INDEX
from scalesched.policies import get_policy
from scalesched.serve.engine import (
    EngineServer,
    backends_yaml,
    fleet_servers,
    server_of_type,
    start_site,
)
from scalesched.serve.gateway import Gateway, load_by_model


def test_the_fleet_backends_file_loads_back_for_every_gpu_server():
    spec = get_cluster("hetero-8")
    plan = fleet_servers(spec, None)
    gpu = [s for s in spec.servers if s.gpus > 0]
    assert [s.name for s, _ in plan] == [s.name for s in gpu]
    text = backends_yaml(
        [(s, m, f"http://127.0.0.1:{18000 + i}/v1") for i, (s, m) in enumerate(plan)]
    )
    backends = backends_from_dict(yaml.safe_load(text), "fleet")
    assert [b.server_type for b in backends] == [s.type for s in gpu]
    assert "llama-2-70b" not in backends[2].models  # an l4 x4 cannot hold it
    assert backends[0].models["llama-2-70b"] == "llama-2-70b"


def test_scraped_load_beyond_the_gateways_own_is_added_to_the_view():
    engine = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, 1.0)
    model = engine.models["llama"]
    model.batch.admit(100, 100)
    model.batch.admit(100, 100)  # two requests running that the gateway did not send
    b = BackendEntry(
        name="b",
        endpoint=EndpointSettings(base_url="http://127.0.0.1:1/v1"),
        models={"llama": "llama-2-7b"},
        server_type="h100-80g-x1",
    )
    gw = Gateway([b], get_policy("eft"), get_policy("least_loaded"))
    load = load_by_model(engine.metrics_text(), b, gw.state.catalog)
    m = MODEL_INDEX["llama-2-7b"]
    assert load == {m: 2.0}
    gw.state.own_batch[0, m] = 1  # one of them is the gateway's own
    gw.state.observe(0, load)
    assert gw.state.engine_batch[0, m] == 2.0 and gw.state.external[0, m] == 1.0


def test_the_load_scan_reads_what_a_prometheus_parser_reads():
    """The gateway scans only vLLM's two load series; on a text with other series, other
    labels, escaped quotes, a timestamp and comments, it must sum what a full parse does."""
    from prometheus_client.parser import text_string_to_metric_families

    text = (
        "# HELP vllm:num_requests_running Requests running\n"
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="org/m \\"7b\\""} 3.0\n'
        'vllm:num_requests_waiting{model_name="org/m \\"7b\\"",engine="0"} 2.0 1700000000\n'
        'vllm:num_requests_running{model_name="phi"} 1\n'
        'vllm:num_requests_waiting{model_name="not-served"} 9\n'
        'vllm:num_requests_running_total{model_name="phi"} 100\n'
        'vllm:kv_cache_usage_perc{model_name="phi"} 0.5\n'
    )
    served = {'org/m "7b"': "llama-2-7b", "phi": "phi-2"}
    b = BackendEntry(
        name="b",
        endpoint=EndpointSettings(base_url="http://127.0.0.1:1/v1"),
        models=served,
        server_type="h100-80g-x1",
    )
    catalog = {name: MODEL_INDEX[model] for name, model in served.items()}
    expected: dict[int, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.labels.get("model_name", "")
            load = sample.name in ("vllm:num_requests_running", "vllm:num_requests_waiting")
            if load and name in catalog:
                expected[catalog[name]] = expected.get(catalog[name], 0.0) + sample.value
    assert expected == {MODEL_INDEX["llama-2-7b"]: 5.0, MODEL_INDEX["phi-2"]: 1.0}
    assert load_by_model(text, b, catalog) == expected
    broken = text.replace("} 1\n", "} one\n")
    assert load_by_model(broken, b, catalog) == {}  # unparsable: no load this time


def test_api_key_and_extra_fields_reach_the_backend(monkeypatch):
    monkeypatch.setenv("SERVE_TEST_KEY", "sekrit")
    seen = {}

    async def handler(request: web.Request) -> web.Response:
        seen["auth"] = request.headers.get("Authorization")
        seen["body"] = await request.json()
        return web.json_response({"choices": []})

    async def main():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        up, port = await start_site(app, "127.0.0.1", 0)
        endpoint = EndpointSettings(
            base_url=f"http://127.0.0.1:{port}/v1", api_key_env="SERVE_TEST_KEY", extra={"top_k": 5}
        )
        b = BackendEntry(
            name="b", endpoint=endpoint, models={"llama": "llama-2-7b"}, server_type="h100-80g-x1"
        )
        gw = Gateway([b], Prefer([0]), get_policy("least_loaded"), scrape_s=60)
        runner, gport = await start_site(gw.app(), "127.0.0.1", 0)
        try:
            import aiohttp

            async with aiohttp.ClientSession() as s:
                body = {"model": "llama", "messages": [{"role": "user", "content": "x"}]}
                async with s.post(f"http://127.0.0.1:{gport}/v1/chat/completions", json=body) as r:
                    assert r.status == 200
        finally:
            await runner.cleanup()
            await up.cleanup()

    asyncio.run(main())
    assert seen["auth"] == "Bearer sekrit" and seen["body"]["top_k"] == 5
