"""The runtime's emulated LLM backend reads the same engine model as the simulator
(``decision.llm_engine``): a request alone on an engine takes the same model seconds in
both, and a request that does not fit in KV memory waits for the one ahead of it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX
from scalesched.policies import get_policy
from scalesched.runtime import agent as agent_module
from scalesched.runtime.agent import ServerAgent, TaskSpec
from scalesched.sim.run import simulate
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance

CLUSTER = ClusterSpec("one", (ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0),))
MODEL = "llama-2-7b"


def llm_spec(task: str, prompt: int, output: int) -> TaskSpec:
    return TaskSpec(0, task, 0, "llm", MODEL, prompt, output, 0.0, 0.0, ())


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every sleep the agent takes, in model seconds (time_scale 1), without waiting."""
    taken: list[float] = []

    async def fake(seconds: float) -> None:
        taken.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(agent_module, "sleep_at_least", fake)
    return taken


def test_a_lone_request_takes_the_simulators_time(sleeps: list[float]) -> None:
    prompt, output = 700, 150
    agent = ServerAgent(CLUSTER, 0, time_scale=1.0)
    asyncio.run(agent.run(llm_spec("a", prompt, output)))
    load_s, exec_s = sleeps
    task = TaskInstance("a", "llm", model=MODEL, prompt_tokens=prompt, output_tokens=output)
    wf = WorkflowInstance("wf", "test", (task,), ((),), ((),), {})
    sim = simulate(CLUSTER, [Job(0, 0.0, wf)], get_policy("eft"))
    assert load_s + exec_s == pytest.approx(sim.response_times[0], rel=1e-12)


def test_a_request_that_does_not_fit_waits_for_memory(sleeps: list[float]) -> None:
    agent = ServerAgent(CLUSTER, 0, time_scale=1.0)
    t = agent.tables
    perf = t.engines[t.engine_class[0, MODEL_INDEX[MODEL]]]
    kv_cap = perf.kv_capacity_tokens
    big, small = llm_spec("big", kv_cap - 100, 50), llm_spec("small", 200, 50)

    async def both() -> list[tuple[dict[str, Any], Any]]:
        first = asyncio.ensure_future(agent.run(big))
        await asyncio.sleep(0)  # the big one queues first
        return list(await asyncio.gather(first, agent.run(small)))

    (big_meta, _), (small_meta, _) = asyncio.run(both())
    assert small_meta["start"] >= big_meta["start"]
    # Each ran alone: the small one was timed in a batch of one, not beside the big one.
    alone = perf.prefill_s(200) + 50 * perf.decode_step_s(1, 200 + 25)
    assert sleeps[-1] == pytest.approx(alone, rel=1e-9)
    assert asyncio.run(agent.in_use()) == {
        "calls": 0,
        "cores": 0,
        "requests": 0,
        "kv_tokens": 0,
        "engine_users": 0,
    }
