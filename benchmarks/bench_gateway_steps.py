"""The gateway's per-call CPU cost, step by step, in one process (no network between processes).

    python benchmarks/bench_gateway_steps.py                          # this tree
    PYTHONPATH=/tmp/before/src python benchmarks/bench_gateway_steps.py   # another tree

Three figures, each the best of 5 repetitions of CPU time (``time.process_time``), so that
other jobs on a shared machine inflate them less than wall-clock latencies:

- ``own_us_per_call``: what the gateway itself does per call, without HTTP: the body's JSON,
  ``parse_request``, the task, the decision pass (``make_decision``, the backend mask,
  ``eft``, booking), the per-call metrics and the release, over hetero-16's 12 backends
  (``fleet --instant``'s);
- ``scrape_parse_us``: reading one backend's load off its ``/metrics`` text (an emulated
  engine serving every catalog model that fits an h100-80g-x4), done for each backend
  every ``--scrape-s``;
- ``aiohttp_us_per_call``, ``lean_client_us_per_call`` and ``raw_socket_us_per_call``: an
  aiohttp server answering a fixed body to aiohttp's pooled client, to the gateway's own
  upstream client (:class:`scalesched.serve.upstream.Pool`) and to a bare keep-alive socket
  client: the HTTP libraries' share of a forwarded call (a gateway is one server and one
  client per call).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from scalesched.cluster import get_cluster
from scalesched.cluster.endpoints import BackendEntry, EndpointSettings, backends_from_dict
from scalesched.cluster.tables import MODEL_INDEX
from scalesched.policies import get_policy
from scalesched.serve.engine import EngineServer, backends_yaml, fleet_servers, server_of_type
from scalesched.serve.gateway import Gateway, WaitingRequest, load_by_model
from scalesched.serve.loop import new_event_loop
from scalesched.serve.protocol import parse_request, task_signals
from scalesched.serve.upstream import Pool

BODY = json.dumps(
    {
        "model": "llama-2-7b",
        "messages": [{"role": "user", "content": "hello " * 50}],
        "max_tokens": 16,
    }
).encode()
ANSWER = json.dumps({"id": "x", "choices": [{"message": {"content": "hi"}}]}).encode()


def _best_us(step: Callable[[int], Any], n: int, repeats: int = 5) -> float:
    """The best of ``repeats`` runs of ``n`` calls, CPU microseconds per call."""
    for i in range(min(n, 300)):  # warm caches and lazily built tables
        step(i)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        for i in range(n):
            step(i)
        best = min(best, (time.process_time() - t0) / n)
    return best * 1e6


def own_us_per_call(n: int = 3000) -> float:
    plan = fleet_servers(get_cluster("hetero-16"), None, None)
    urls = [(s, m, f"http://127.0.0.1:{18000 + i}/v1") for i, (s, m) in enumerate(plan)]
    backends = backends_from_dict(yaml.safe_load(backends_yaml(urls)), "fleet")
    gw = Gateway(backends, get_policy("eft"), get_policy("least_loaded"))
    loop = asyncio.new_event_loop()

    def call(i: int) -> None:
        req = parse_request(json.loads(BODY), True)
        task = gw.state.task(req, f"wf-{i}", f"wf-{i}", task_signals({}))
        waiting = WaitingRequest(req.model, task, (), loop.create_future())
        gw.pending.append(waiting)
        gw._drive()
        server, est, _priority = waiting.placed.result()
        gw._ok[server].inc()
        gw._latency[server].observe(0.001)
        gw._ended(task, server, est)

    try:
        return _best_us(call, n)
    finally:
        loop.close()


def scrape_parse_us(n: int = 2000) -> float:
    server = server_of_type("h100-80g-x4")
    served = dict(
        next(m for s, m in fleet_servers(get_cluster("hetero-16"), None) if s.type == server.type)
    )
    text = EngineServer(server, served, 1.0).metrics_text()
    backend = BackendEntry(
        name="b",
        endpoint=EndpointSettings(base_url="http://127.0.0.1:1/v1"),
        models=served,
        server_type=server.type,
    )
    catalog = {name: MODEL_INDEX[model] for name, model in served.items()}
    assert load_by_model(text, backend, catalog) == {m: 0.0 for m in set(catalog.values())}
    return _best_us(lambda _i: load_by_model(text, backend, catalog), n)


async def _http_us_per_call(n: int) -> tuple[float, float, float]:
    async def answer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=ANSWER, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url, headers = (
        f"http://127.0.0.1:{port}/v1/chat/completions",
        {"Content-Type": "application/json"},
    )
    timeout = aiohttp.ClientTimeout(total=60)
    connector = aiohttp.TCPConnector(limit=0)
    session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    raw += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY

    async def with_aiohttp() -> None:
        async with session.post(url, data=BODY, headers=headers, timeout=timeout) as r:
            await r.read()

    pool = Pool(f"http://127.0.0.1:{port}/v1", headers)

    async def with_pool() -> None:
        conn = await pool.call("POST", "/v1/chat/completions", BODY, 60.0)
        conn.body()
        conn.release()

    async def with_socket() -> None:
        writer.write(raw)
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)

    out = []
    for call in (with_aiohttp, with_pool, with_socket):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            for _ in range(n):
                await call()
            best = min(best, (time.process_time() - t0) / n)
        out.append(best * 1e6)
    writer.close()
    pool.close()
    await session.close()
    await runner.cleanup()
    return out[0], out[1], out[2]


def main() -> None:
    loop = new_event_loop()
    try:
        aiohttp_us, pool_us, socket_us = loop.run_until_complete(_http_us_per_call(2000))
    finally:
        loop.close()
    result = {
        "own_us_per_call": round(own_us_per_call(), 1),
        "scrape_parse_us": round(scrape_parse_us(), 1),
        "aiohttp_us_per_call": round(aiohttp_us, 1),
        "lean_client_us_per_call": round(pool_us, 1),
        "raw_socket_us_per_call": round(socket_us, 1),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
