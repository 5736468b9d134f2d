"""The emulated engine: OpenAI answers, streaming, vLLM metrics, and timing by the cost
model (a bigger batch decodes each step more slowly; a full batch queues)."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp

from scalesched.cluster.catalog import SERVER_TYPES
from scalesched.cluster.perf import engine_perf
from scalesched.serve.engine import EngineServer, server_of_type, start_site
from scalesched.serve.protocol import NO_PRIORITY


async def _engine(time_scale: float, server_type: str = "h100-80g-x1"):
    server = EngineServer(server_of_type(server_type), {"llama": "llama-2-7b"}, time_scale)
    runner, port = await start_site(server.app(), "127.0.0.1", 0)
    return server, runner, f"http://127.0.0.1:{port}"


def test_chat_and_completions_answer_with_max_tokens():
    async def main():
        _, runner, url = await _engine(0.0)
        try:
            async with aiohttp.ClientSession() as s:
                body = {
                    "model": "llama",
                    "messages": [{"role": "user", "content": "x" * 40}],
                    "max_tokens": 7,
                }
                async with s.post(url + "/v1/chat/completions", json=body) as r:
                    assert r.status == 200
                    out = await r.json()
                assert out["usage"] == {
                    "prompt_tokens": 10,
                    "completion_tokens": 7,
                    "total_tokens": 17,
                }
                assert out["choices"][0]["message"]["role"] == "assistant"
                body = {"model": "llama", "prompt": "abcd", "max_tokens": 3}
                async with s.post(url + "/v1/completions", json=body) as r:
                    out = await r.json()
                assert out["object"] == "text_completion" and out["usage"]["completion_tokens"] == 3
                async with s.get(url + "/v1/models") as r:
                    assert [m["id"] for m in (await r.json())["data"]] == ["llama"]
                async with s.post(
                    url + "/v1/completions", json={"model": "nope", "prompt": "a"}
                ) as r:
                    assert r.status == 404
                    assert (await r.json())["error"]["code"] == "model_not_found"
                async with s.post(url + "/v1/completions", data=b"{not json") as r:
                    assert r.status == 400
                    assert (await r.json())["error"]["type"] == "invalid_request_error"
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_stream_delivers_every_token_then_done():
    async def main():
        _, runner, url = await _engine(0.05)
        try:
            async with aiohttp.ClientSession() as s:
                body = {
                    "model": "llama",
                    "prompt": "hi",
                    "max_tokens": 20,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
                async with s.post(url + "/v1/completions", json=body) as r:
                    raw = (await r.read()).decode()
            events = [e[len("data: ") :] for e in raw.split("\n\n") if e]
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
            assert text.count("tok") == 20
            assert chunks[-1]["usage"]["completion_tokens"] == 20
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_timing_follows_the_cost_model_and_batching_slows_steps():
    """One request alone takes prefill + output x (batch-1 step); 64 at once take
    longer each (a bigger batch's step is slower), as the cost model says."""
    scale, out = 0.2, 200
    perf = engine_perf("llama-2-7b", SERVER_TYPES["h100-80g-x1"].gpu_type or "", 1)

    async def run(n: int) -> float:
        server, runner, url = await _engine(scale)
        try:
            async with aiohttp.ClientSession() as s:
                body = {"model": "llama", "prompt": "x" * 400, "max_tokens": out}
                t0 = time.perf_counter()
                await asyncio.gather(
                    *[s.post(url + "/v1/completions", json=body) for _ in range(n)]
                )
                return (time.perf_counter() - t0) / scale
        finally:
            await runner.cleanup()

    alone = asyncio.run(run(1))
    model = perf.prefill_s(100) + sum(perf.decode_step_s(1, 100 + out // 2) for _ in range(out))
    # A loaded machine only slows the engine down: its pace is never faster than the model,
    # and a wrong time scale (10x off either way) fails the loose upper bound. The bound is
    # 5x, not 3x: 64 streams served and read by one event loop on two busy cores (the full
    # suite, Ray's leftovers beside it) measured 3.08x the model once in CI; it passes alone.
    assert model * 0.95 < alone < model * 5, (alone, model)
    # 64 at once: the model's steps are 1.56x slower than alone, a margin the noise of a
    # loaded machine cannot cross (8 at once differ by 5%, too close to call).
    many = asyncio.run(run(64))
    model_many = perf.prefill_s(100) + out * perf.decode_step_s(64, 64 * (100 + out // 2))
    assert many > alone * 1.2, (many, alone)
    assert model_many * 0.95 < many < model_many * 5, (many, model_many)


def test_metrics_show_running_and_waiting_under_a_full_batch():
    async def main():
        server, runner, url = await _engine(0.5)
        model = server.models["llama"]
        model.batch.max_batch = 2  # a tiny batch: the third request must wait
        try:
            async with aiohttp.ClientSession() as s:
                body = {"model": "llama", "prompt": "x", "max_tokens": 50}
                tasks = [
                    asyncio.ensure_future(s.post(url + "/v1/completions", json=body))
                    for _ in range(3)
                ]
                await asyncio.sleep(0.05)
                async with s.get(url + "/metrics") as r:
                    text = await r.text()
                assert 'vllm:num_requests_running{model_name="llama"} 2.0' in text
                assert 'vllm:num_requests_waiting{model_name="llama"} 1.0' in text
                assert "vllm:gpu_cache_usage_perc" in text and "vllm:kv_cache_usage_perc" in text
                for t in tasks:
                    t.cancel()
        finally:
            await runner.cleanup()

    asyncio.run(main())


def test_a_starved_event_loop_delays_chunks_not_the_model():
    """The event loop blocked for 0.3 s mid-decode (a CPU-starved emulator): the request
    still ends when the cost model says (tokens due are caught up at once), and the
    lateness shows in the engine's metrics."""
    scale, out = 1.0, 200
    server = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, scale)
    model = server.models["llama"]
    perf = model.batch.perf
    expected = perf.prefill_s(10) + out * perf.decode_step_s(1, 10 + out // 2)

    async def main() -> float:
        async def hog() -> None:
            await asyncio.sleep(expected * 0.3)
            time.sleep(0.3)  # blocks the loop: no step wakes up meanwhile

        t0 = time.perf_counter()
        hogging = asyncio.ensure_future(hog())
        produced = [k async for k in model.generate(10, out)]
        await hogging
        assert sum(produced) == out
        model.close()
        return time.perf_counter() - t0

    took = asyncio.run(main())
    assert expected > 0.6  # the block is a large part of the request
    assert abs(took - expected) < 0.1 * expected, (took, expected)
    assert model.late_s_max >= 0.25
    assert "scalesched_emulator_late_seconds_max" in server.metrics_text()


def test_a_full_batch_admits_the_lowest_priority_value_first():
    """One batch slot, held by a request that has not left: four requests queue (none,
    5, 1, 1); when the slot frees they are admitted lower value first, equal values in
    arrival order, the one without a priority last (the simulator's rule)."""
    server = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, 0.01)
    model = server.models["llama"]
    model.batch.max_batch = 1
    admitted: list[str] = []

    async def call(name: str, priority: float) -> None:
        async for _ in model.generate(10, 4, priority):
            pass
        admitted.append(name)  # one slot: each ends before the next is admitted

    async def main() -> None:
        holder = model.generate(10, 4)
        await holder.__anext__()  # admitted and decoding; it holds the slot until closed
        calls = [("none", NO_PRIORITY), ("five", 5), ("one", 1), ("one again", 1)]
        tasks = [asyncio.ensure_future(call(name, p)) for name, p in calls]
        for _ in range(100):
            if len(model.waiting) == len(calls):
                break
            await asyncio.sleep(0.01)
        assert [r.priority for r in model.waiting] == [1, 1, 5, NO_PRIORITY]
        await holder.aclose()  # the slot frees
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        model.close()

    asyncio.run(main())
    assert admitted == ["one", "one again", "five", "none"]


def test_a_priority_in_the_body_reaches_the_queue_and_a_bad_one_is_refused():
    async def until(condition) -> None:  # type: ignore[no-untyped-def]
        for _ in range(200):  # 2 s at most
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the engine never reached the expected state")

    async def main():
        server, runner, url = await _engine(0.1)
        model = server.models["llama"]
        model.batch.max_batch = 1
        try:
            async with aiohttp.ClientSession() as s:
                body = {"model": "llama", "prompt": "x", "max_tokens": 1000}
                first = asyncio.ensure_future(s.post(url + "/v1/completions", json=body))
                await until(lambda: model.running == 1)
                second = asyncio.ensure_future(
                    s.post(url + "/v1/completions", json={**body, "priority": -2})
                )
                await until(lambda: len(model.waiting) == 1)
                assert model.waiting[0].priority == -2
                async with s.post(url + "/v1/completions", json={**body, "priority": "hi"}) as r:
                    assert r.status == 400
                    assert (await r.json())["error"]["param"] == "priority"
                for t in (first, second):
                    t.cancel()
        finally:
            await runner.cleanup()

    asyncio.run(main())
