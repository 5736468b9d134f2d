"""The gateway: placement through the decision cycle, pass-through of answers and streams,
OpenAI-shaped refusals, the fallback policy, and each fault it must survive."""

from __future__ import annotations

import asyncio
import json

import aiohttp
from aiohttp import web
from conftest import Prefer, backend, free_port

from scalesched.policies import get_policy
from scalesched.serve.engine import EngineServer, server_of_type, start_site
from scalesched.serve.gateway import Gateway

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}


async def engines(n: int, time_scale: float = 0.0):
    out = []
    for _ in range(n):
        e = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, time_scale)
        runner, port = await start_site(e.app(), "127.0.0.1", 0)
        out.append((e, runner, f"http://127.0.0.1:{port}/v1"))
    return out


async def gateway(backends, scheduler, **kw):
    gw = Gateway(backends, scheduler, get_policy("least_loaded"), **kw)
    runner, port = await start_site(gw.app(), "127.0.0.1", 0)
    return gw, runner, f"http://127.0.0.1:{port}"


async def cleanup(*runners):
    for r in runners:
        await r.cleanup()


def sse_events(raw: bytes) -> list[str]:
    return [e[len("data: ") :] for e in raw.decode().split("\n\n") if e.startswith("data: ")]


def test_eft_places_answers_and_streams_through_the_cycle():
    async def main():
        es = await engines(2)
        bs = [backend(f"b{i}", url) for i, (_, _, url) in enumerate(es)]
        gw, runner, url = await gateway(bs, get_policy("eft"))
        try:
            async with aiohttp.ClientSession() as s:
                headers = {"x-workflow-id": "wf-1", "x-session-id": "wf-1/agent"}
                for _ in range(4):
                    async with s.post(
                        url + "/v1/chat/completions", json=CHAT, headers=headers
                    ) as r:
                        assert r.status == 200
                        assert (await r.json())["usage"]["completion_tokens"] == 8
                body = {**CHAT, "stream": True}
                async with s.post(url + "/v1/chat/completions", json=body) as r:
                    events = sse_events(await r.read())
                assert events[-1] == "[DONE]"
                async with s.get(url + "/v1/models") as r:
                    assert [m["id"] for m in (await r.json())["data"]] == ["llama"]
                async with s.get(url + "/metrics") as r:
                    metrics = await r.text()
            assert 'scalesched_gateway_decisions_total{policy="eft"} 5.0' in metrics
            assert "scalesched_gateway_ttft_seconds_bucket" in metrics
            assert "scalesched_gateway_decision_seconds_count 5.0" in metrics
            # Every placement was released: nothing left booked on the state.
            assert gw.state.n_assigned.sum() == 0 and gw.state.own_batch.sum() == 0
            assert gw.state._calls["wf-1/agent"] == 3  # the session's calls were counted
        finally:
            await cleanup(runner, *[r for _, r, _ in es])

    asyncio.run(main())


def test_bad_bodies_and_unknown_models_get_openai_errors():
    async def main():
        es = await engines(1)
        gw, runner, url = await gateway([backend("b0", es[0][2])], get_policy("eft"))
        try:
            async with aiohttp.ClientSession() as s:
                for data, status, param in (
                    (b"{nope", 400, None),
                    (json.dumps({"model": "llama"}).encode(), 400, "messages"),
                    (json.dumps({**CHAT, "max_tokens": -1}).encode(), 400, "max_tokens"),
                    (json.dumps({**CHAT, "model": "gpt-9"}).encode(), 404, "model"),
                ):
                    async with s.post(url + "/v1/chat/completions", data=data) as r:
                        assert r.status == status
                        err = (await r.json())["error"]
                        assert err["type"] == "invalid_request_error" and err["param"] == param
        finally:
            await cleanup(runner, es[0][1])

    asyncio.run(main())


class Broken(Prefer):
    name = "broken"

    def select(self, decision):  # type: ignore[no-untyped-def]
        raise RuntimeError("policy bug")


def test_a_policy_that_raises_falls_back_and_is_counted():
    async def main():
        es = await engines(1)
        gw, runner, url = await gateway([backend("b0", es[0][2])], Broken([0]))
        try:
            async with aiohttp.ClientSession() as s:
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                async with s.get(url + "/metrics") as r:
                    metrics = await r.text()
            assert (
                'scalesched_gateway_fallbacks_total{policy="broken",reason="error"} 1.0' in metrics
            )
        finally:
            await cleanup(runner, es[0][1])

    asyncio.run(main())


def test_a_full_gateway_answers_429_with_retry_after():
    async def main():
        es = await engines(1, time_scale=1.0)  # slow: the first request holds its slot
        gw, runner, url = await gateway([backend("b0", es[0][2])], get_policy("eft"), max_pending=1)
        try:
            async with aiohttp.ClientSession() as s:
                slow = asyncio.ensure_future(
                    s.post(url + "/v1/chat/completions", json={**CHAT, "max_tokens": 100})
                )
                await asyncio.sleep(0.1)
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 429 and r.headers["Retry-After"] == "1"
                    assert (await r.json())["error"]["type"] == "rate_limit_error"
                async with await slow as r:
                    assert r.status == 200  # the request in flight was not disturbed
        finally:
            await cleanup(runner, es[0][1])

    asyncio.run(main())


async def no_metrics(_r: web.Request) -> web.Response:
    return web.Response(text="")


async def fake_backend(handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_get("/metrics", no_metrics)
    runner, port = await start_site(app, "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{port}/v1"


def test_upstream_5xx_and_malformed_json_are_retried_elsewhere_then_502():
    async def five(_r):
        return web.json_response({"error": "boom"}, status=500)

    async def garbage(_r):
        return web.Response(text="{not json", content_type="application/json")

    async def main():
        es = await engines(1)
        r500, u500 = await fake_backend(five)
        rbad, ubad = await fake_backend(garbage)
        bs = [backend("five", u500), backend("bad", ubad), backend("good", es[0][2])]
        gw, runner, url = await gateway(bs, Prefer([0, 1, 2]), scrape_s=60)
        gw2, runner2, url2 = await gateway(bs[:2], Prefer([0, 1]), scrape_s=60)
        try:
            async with aiohttp.ClientSession() as s:
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200  # five, then bad, then good
                async with s.get(url + "/metrics") as r:
                    metrics = await r.text()
                assert 'scalesched_gateway_retries_total{backend="five"} 1.0' in metrics
                assert 'scalesched_gateway_retries_total{backend="bad"} 1.0' in metrics
                async with s.post(url2 + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 502
                    err = (await r.json())["error"]
                assert err["type"] == "server_error" and "malformed JSON" in err["message"]
        finally:
            await cleanup(runner, runner2, r500, rbad, es[0][1])

    asyncio.run(main())


def test_a_killed_backend_breaks_its_streams_cleanly_and_is_masked_until_healthy(engine_process):
    port = free_port()
    proc = engine_process(port, 0.5)  # slow: a stream lasts seconds

    async def main():
        es = await engines(1)
        bs = [backend("victim", f"http://127.0.0.1:{port}/v1"), backend("good", es[0][2])]
        gw, runner, url = await gateway(bs, Prefer([0, 1]), scrape_s=60)
        try:
            async with aiohttp.ClientSession() as s:
                body = {**CHAT, "stream": True, "max_tokens": 5000}
                async with s.post(url + "/v1/chat/completions", json=body) as r:
                    first = await r.content.readline()
                    assert first.startswith(b"data: ")
                    proc.kill()  # mid-stream
                    rest = await asyncio.wait_for(r.read(), timeout=10)
                events = sse_events(first + rest)
                assert events[-1] == "[DONE]"
                assert json.loads(events[-2])["error"]["code"] == "backend_failed"
                assert not gw.state.healthy[0]
                # Masked: the next requests go to the other backend without a retry.
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                # Healthy again once its /metrics answers.
                proc.start()
                await gw._scrape(0)
                assert gw.state.healthy[0]
                # Killed again before any scrape notices: the request is retried elsewhere.
                proc.kill()
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                async with s.get(url + "/metrics") as r:
                    metrics = await r.text()
                assert 'scalesched_gateway_retries_total{backend="victim"} 1.0' in metrics
                assert 'scalesched_gateway_backend_healthy{backend="victim"} 0.0' in metrics
            assert gw.state.n_assigned.sum() == 0
        finally:
            await cleanup(runner, es[0][1])

    asyncio.run(main())


class Seen(Prefer):
    """Prefer, recording the task of every decision."""

    def __init__(self, order: list[int]) -> None:
        super().__init__(order)
        self.tasks: list = []

    def select(self, decision):  # type: ignore[no-untyped-def]
        self.tasks.append(decision.task)
        return super().select(decision)


def test_task_signal_headers_reach_the_decision_and_bad_ones_are_refused():
    async def main():
        es = await engines(1)
        seen = Seen([0])
        gw, runner, url = await gateway([backend("b0", es[0][2])], seen)
        try:
            async with aiohttp.ClientSession() as s:
                signals = {
                    "x-task-role": "coder",
                    "x-task-pattern": "codegen",
                    "x-task-output-est": "120",
                    "x-task-hint": "-0.25",
                }
                async with s.post(url + "/v1/chat/completions", json=CHAT, headers=signals) as r:
                    assert r.status == 200
                async with s.post(url + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
                for header, value in (("x-task-output-est", "many"), ("x-task-hint", "nan")):
                    async with s.post(
                        url + "/v1/chat/completions", json=CHAT, headers={header: value}
                    ) as r:
                        assert r.status == 400
                        assert (await r.json())["error"]["param"] == header
        finally:
            await cleanup(runner, *[r for _, r, _ in es])
        with_signals, without = seen.tasks
        assert (with_signals.role, with_signals.pattern) == ("coder", "codegen")
        assert (with_signals.output_tokens_est, with_signals.difficulty_hint) == (120, -0.25)
        assert (without.role, without.output_tokens_est, without.difficulty_hint) == (None, 8, 0.0)

    asyncio.run(main())
