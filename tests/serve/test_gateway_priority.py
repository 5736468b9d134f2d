"""Admission priorities through the gateway: a body goes upstream untouched unless its
backend is named by ``forward_priority``; then it carries the policy's priority as an
integer, which the emulated engine honours end to end."""

from __future__ import annotations

import asyncio
import json
import math

import aiohttp
import pytest
from aiohttp import web
from conftest import Prefer, backend
from test_gateway import cleanup, engines, gateway

from scalesched.decision.actions import Place
from scalesched.errors import InputError
from scalesched.policies import get_policy
from scalesched.serve.engine import start_site
from scalesched.serve.gateway import priority_backends
from scalesched.serve.protocol import (
    INT64_MAX,
    INT64_MIN,
    NO_PRIORITY,
    BadRequest,
    parse_request,
    wire_priority,
)

# Odd spacing and key order: a re-encoded body would not be byte-equal to it.
RAW = (
    b'{"max_tokens": 4,  "model":"llama", "priority": 7,\n'
    b' "messages":[{"role":"user","content":"hi"}]}'
)


class Prioritize(Prefer):
    """Prefer's server, with the next priority of ``priorities`` (one per decision)."""

    name = "prioritize"

    def __init__(self, order: list[int], priorities: list[float | None]) -> None:
        super().__init__(order)
        self.priorities = list(priorities)

    def select(self, decision):  # type: ignore[no-untyped-def]
        return Place(super().select(decision), priority=self.priorities.pop(0))


async def recording_backend(delay_s: float = 0.0) -> tuple[web.AppRunner, str, list[bytes]]:
    """A backend that records the bytes of every body it gets and answers a completion
    (after ``delay_s``)."""
    seen: list[bytes] = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(await request.read())
        await asyncio.sleep(delay_s)
        return web.json_response(
            {"id": "x", "object": "chat.completion", "choices": [], "usage": {}}
        )

    async def metrics(_r: web.Request) -> web.Response:
        return web.Response(text="")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/metrics", metrics)
    runner, port = await start_site(app, "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{port}/v1", seen


async def post_raw(url: str, data: bytes, headers: dict[str, str] | None = None) -> int:
    async with (
        aiohttp.ClientSession() as s,
        s.post(url + "/v1/chat/completions", data=data, headers=headers) as r,
    ):
        await r.read()
        return r.status


def test_wire_priority_keeps_order_and_ties_and_drops_no_priority():
    values = [-2.5, 0.0, 0.0004, 0.0006, 1.2344, 1.2344, 3.0, 1e300]
    wired = [wire_priority(v) for v in values]
    assert wired == [-2500, 0, 0, 1, 1234, 1234, 3000, INT64_MAX]
    assert wired == sorted(wired)  # the order is never inverted
    assert wire_priority(-1e300) == INT64_MIN
    assert [wire_priority(v) for v in (None, math.inf, -math.inf, math.nan)] == [None] * 4


def test_a_body_priority_must_be_a_64_bit_integer():
    body = {"model": "m", "prompt": "p"}
    assert parse_request(body, chat=False).priority == NO_PRIORITY
    assert parse_request({**body, "priority": None}, chat=False).priority == NO_PRIORITY
    assert parse_request({**body, "priority": -3}, chat=False).priority == -3
    assert parse_request({**body, "priority": 4.0}, chat=False).priority == 4
    for bad in (1.5, "1", True, INT64_MAX + 1, [1]):
        with pytest.raises(BadRequest) as err:
            parse_request({**body, "priority": bad}, chat=False)
        assert err.value.param == "priority"


def test_forwarding_off_passes_the_clients_bytes_unchanged():
    async def main():
        runner_b, url_b, seen = await recording_backend()
        # plas sets a priority on every placement: with forwarding off it must not show.
        gw, runner, url = await gateway([backend("b0", url_b)], get_policy("plas"), scrape_s=60)
        try:
            assert await post_raw(url, RAW) == 200
            assert seen == [RAW]
            async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
                metrics = await r.text()
            assert 'scalesched_gateway_priorities_forwarded_total{backend="b0"} 0.0' in metrics
        finally:
            await cleanup(runner, runner_b)

    asyncio.run(main())


def test_forwarding_on_writes_the_policys_priority_where_named():
    async def main():
        r0, u0, seen0 = await recording_backend()
        r1, u1, seen1 = await recording_backend()
        bs = [backend("b0", u0), backend("b1", u1)]
        policy = Prioritize([1], [1.2344, 0.0004, None, 2.0])
        gw, runner, url = await gateway(bs, policy, scrape_s=60, forward_priority=["b1"])
        try:
            for _ in range(3):
                assert await post_raw(url, RAW) == 200
            policy.order = [0]  # b0 is not named: its body passes untouched
            assert await post_raw(url, RAW) == 200
            async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
                metrics = await r.text()
        finally:
            await cleanup(runner, r0, r1)
        sent = json.loads(RAW)
        # The policy's priority replaces the client's; with none, the client's bytes pass.
        assert [json.loads(b) for b in seen1[:2]] == [
            {**sent, "priority": 1234},
            {**sent, "priority": 0},
        ]
        assert seen1[2] == RAW
        assert seen0 == [RAW]
        assert 'scalesched_gateway_priorities_forwarded_total{backend="b1"} 2.0' in metrics

    asyncio.run(main())


def test_fcfs_workflow_priorities_order_workflows_and_tie_within_one():
    async def main():
        runner_b, url_b, seen = await recording_backend()
        gw, runner, url = await gateway(
            [backend("b0", url_b)],
            get_policy("fcfs_workflow"),
            scrape_s=60,
            forward_priority=["b0"],
        )
        try:
            for workflow in ("wf-a", "wf-b", "wf-a"):
                assert await post_raw(url, RAW, {"x-workflow-id": workflow}) == 200
                await asyncio.sleep(0.1)
        finally:
            await cleanup(runner, runner_b)
        a1, b, a2 = (json.loads(body)["priority"] for body in seen)
        # A workflow's calls carry its arrival (ms). The task's age is taken when the call
        # arrives and its decision comes a little later: microseconds on an idle machine,
        # a few milliseconds on a loaded one (the test once failed at a 1 ms tolerance).
        # The younger workflow, 100 ms later, comes after.
        assert abs(a1 - a2) <= 10 and b - a1 >= 80

    asyncio.run(main())


def test_plas_orders_by_the_service_a_workflow_has_had():
    async def main():
        runner_b, url_b, seen = await recording_backend(delay_s=0.03)
        gw, runner, url = await gateway(
            [backend("b0", url_b)], get_policy("plas"), scrape_s=60, forward_priority=["b0"]
        )
        try:
            for workflow in ("wf-a", "wf-a", "wf-b"):
                assert await post_raw(url, RAW, {"x-workflow-id": workflow}) == 200
        finally:
            await cleanup(runner, runner_b)
        a1, a2, b1 = (json.loads(body)["priority"] for body in seen)
        # wf-a's first call had at least 30 ms of service: its second goes after any new
        # workflow's first (a loaded machine may only lengthen a call, never shorten it).
        assert a1 == b1 == 0 and a2 >= 30

    asyncio.run(main())


def test_the_emulated_engine_admits_by_the_forwarded_priority_end_to_end():
    """One batch slot: a long call holds it; a call with priority 5 queues, then one with
    priority 1; the second is admitted first when the slot frees."""

    async def main():
        es = await engines(1, time_scale=0.1)
        engine, engine_runner, engine_url = es[0]
        model = engine.models["llama"]
        model.batch.max_batch = 1
        policy = Prioritize([0], [0.0, 0.005, 0.001])
        gw, runner, url = await gateway(
            [backend("b0", engine_url)], policy, scrape_s=60, forward_priority=["b0"]
        )
        done: list[str] = []

        async def call(name: str, max_tokens: int) -> None:
            body = {"model": "llama", "messages": [{"role": "user", "content": "x"}]}
            data = json.dumps({**body, "max_tokens": max_tokens}).encode()
            assert await post_raw(url, data) == 200
            done.append(name)

        async def until(condition) -> None:  # type: ignore[no-untyped-def]
            for _ in range(500):  # 5 s at most
                if condition():
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the engine never reached the expected state")

        try:
            # About 1.1 s of wall time at this scale: room to queue the two others.
            holder = asyncio.ensure_future(call("holder", 2000))
            await until(lambda: model.running == 1)
            later = asyncio.ensure_future(call("priority 5", 8))
            await until(lambda: len(model.waiting) == 1)
            sooner = asyncio.ensure_future(call("priority 1", 8))
            await until(lambda: len(model.waiting) == 2)
            assert not holder.done(), "the holder ended before both calls queued"
            assert [r.priority for r in model.waiting] == [1, 5]
            await asyncio.wait_for(asyncio.gather(holder, later, sooner), timeout=10)
        finally:
            await cleanup(runner, engine_runner)
        assert done == ["holder", "priority 1", "priority 5"]

    asyncio.run(main())


def test_priority_backends_reads_all_names_and_refuses_unknown_ones():
    entries = [backend(n, f"http://127.0.0.1:1/v1/{n}") for n in ("a", "b", "c")]
    assert priority_backends(None, entries) == []
    assert priority_backends("all", entries) == ["a", "b", "c"]
    assert priority_backends(" c, a ", entries) == ["c", "a"]
    for spec, words in (("a,zz", ("'zz'", "a, b, c")), (" , ", ("name a backend",))):
        with pytest.raises(InputError) as err:
            priority_backends(spec, entries)
        assert "--forward-priority" in str(err.value)
        assert all(w in str(err.value) for w in words), str(err.value)
