"""Cancelling a hedged copy on a server agent (no Ray needed: the agent is a plain class
with async methods): the copy stops wherever it is, gives back its core, batch slot and KV
memory, and its call returns the model seconds it held them."""

from __future__ import annotations

import asyncio
from typing import Any

from scalesched.cluster import get_cluster
from scalesched.runtime.agent import ServerAgent, TaskSpec

SPEC = get_cluster("hetero-4")
SCALE = 0.01  # one model second is 10 ms


def tool(work: float, copy: int = 0, ext: float = 0.0) -> TaskSpec:
    return TaskSpec(1, "t", 0, "tool", None, 0, 0, work, ext, (), copy=copy)


def llm(out: int, task: str = "q", copy: int = 0) -> TaskSpec:
    return TaskSpec(1, task, 0, "llm", "llama-2-7b", 200, out, 0.0, 0.0, (), copy=copy)


async def cancel_after(agent: ServerAgent, spec: TaskSpec, model_s: float) -> dict[str, Any]:
    call = asyncio.ensure_future(agent.run(spec))
    await asyncio.sleep(model_s * SCALE)
    await agent.cancel(spec.key)
    meta, _ = await asyncio.wait_for(call, timeout=2)
    return meta


def test_a_running_tool_copy_gives_its_core_back_and_is_charged() -> None:
    async def scenario() -> None:
        agent = ServerAgent(SPEC, 3, SCALE)
        agent.cores = 1  # one core: the next tool can start only once it is given back
        call = asyncio.ensure_future(agent.run(tool(100.0)))
        await asyncio.sleep(20.0 * SCALE)
        assert (await agent.in_use())["cores"] == 1
        await agent.cancel(tool(100.0).key)
        meta, _ = await asyncio.wait_for(call, timeout=2)
        assert meta["cancelled"] and 15.0 < meta["held_s"] < 60.0
        assert await agent.in_use() == dict.fromkeys(await agent.in_use(), 0)
        follow, _ = await asyncio.wait_for(agent.run(tool(1.0, copy=1)), timeout=2)
        assert "cancelled" not in follow and follow["end"] - follow["start"] < 0.5

    asyncio.run(scenario())


def test_a_copy_waiting_on_the_outside_world_holds_nothing() -> None:
    async def scenario() -> None:
        agent = ServerAgent(SPEC, 3, SCALE)
        meta = await cancel_after(agent, tool(1.0, ext=100.0), 20.0)
        assert meta["cancelled"] and meta["held_s"] == 0.0

    asyncio.run(scenario())


def test_a_decoding_llm_copy_frees_its_batch_slot_and_kv_memory() -> None:
    async def scenario() -> None:
        agent = ServerAgent(SPEC, 0, SCALE)
        meta = await cancel_after(agent, llm(100_000), 30.0)  # load (~1.7 s), then decode
        assert meta["cancelled"] and meta["held_s"] > 10.0
        eng = next(iter(agent.engines.values()))
        assert (eng.n_active, eng.kv_used, eng.ctx_sum, eng.users) == (0, 0, 0, 0)
        assert not eng.queue
        held = await agent.in_use()
        assert held == dict.fromkeys(held, 0)

    asyncio.run(scenario())


def test_a_copy_cancelled_during_the_load_leaves_the_load_to_the_next_request() -> None:
    async def scenario() -> None:
        agent = ServerAgent(SPEC, 0, SCALE)
        meta = await cancel_after(agent, llm(10), 0.2)  # still loading the model
        assert meta["cancelled"] and meta["held_s"] == 0.0
        after, _ = await asyncio.wait_for(agent.run(llm(10, task="r")), timeout=2)
        assert after["loaded"] is not None and agent.model_loads == 1  # loaded once, reported

    asyncio.run(scenario())


def test_a_copy_cancelled_before_it_starts_returns_at_once() -> None:
    async def scenario() -> None:
        agent = ServerAgent(SPEC, 3, SCALE)
        spec = tool(100.0)
        await agent.cancel(spec.key)
        meta, _ = await asyncio.wait_for(agent.run(spec), timeout=0.5)
        assert meta["cancelled"] and meta["held_s"] == 0.0
        again, _ = await asyncio.wait_for(agent.run(tool(1.0)), timeout=2)
        assert "cancelled" not in again  # the stop applied once

    asyncio.run(scenario())
