"""``Place.priority`` orders an engine's admission queue, in the simulator and in the Ray
runtime's emulated engines; without priorities the queue keeps arrival order."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import pytest
from sim_builders import llm, workflow

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.actions import Place
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.kernel.llm_engine import queue_by_priority
from scalesched.runtime.agent import ServerAgent, TaskSpec
from scalesched.sim.run import simulate
from scalesched.workload.instance import Job

CLUSTER = ClusterSpec("one", (ServerSpec("g0", "custom", "A100-80G", 1, 4, 1.0, 100.0, 8.0),))
MODEL = "llama-2-7b"


def kv_capacity() -> int:
    t = ClusterTables(CLUSTER)
    return int(t.engines[t.engine_class[0, MODEL_INDEX[MODEL]]].kv_capacity_tokens)


class Lifo(BaseScheduler):
    """Server 0; the latest workflow first (``priority`` = minus its arrival time)."""

    name = "lifo"

    def select(self, decision: Decision) -> Place:
        return Place(0, priority=-(decision.now - decision.task.workflow_age))


class Fifo(BaseScheduler):
    name = "fifo"

    def select(self, decision: Decision) -> int:
        return 0


def start_order(scheduler: BaseScheduler) -> list[int]:
    """Four calls that each fill the engine's KV memory, arriving while the model loads:
    they run one at a time, in the order the queue admits them."""
    big = kv_capacity() - 100
    jobs = [
        Job(k, 0.01 * k, workflow([llm("call", MODEL, big, 20)], {}, f"wf-{k}")) for k in range(4)
    ]
    result = simulate(CLUSTER, jobs, scheduler, record_trace=True)
    return [r.workflow for r in sorted(result.trace, key=lambda r: r.start)]


def test_without_priorities_the_queue_keeps_arrival_order() -> None:
    assert start_order(Fifo()) == [0, 1, 2, 3]


def test_priorities_order_admission_in_the_simulator() -> None:
    assert start_order(Lifo()) == [3, 2, 1, 0]


@pytest.mark.parametrize(
    "queued,item,priority,expected",
    [
        ([], 7, 1.0, [7]),
        ([1, 2], 7, 0.5, [7, 1, 2]),  # ahead of larger values
        ([1, 2], 7, 1.0, [1, 7, 2]),  # behind equal ones: ties keep arrival order
        ([1, 2], 7, float("inf"), [1, 2, 7]),
    ],
)
def test_queue_by_priority(
    queued: list[int], item: int, priority: float, expected: list[int]
) -> None:
    priority_of = {1: 1.0, 2: 2.0, 7: priority}
    waiting = deque(queued)
    queue_by_priority(waiting, item, priority, priority_of)
    assert list(waiting) == expected


def test_priorities_order_admission_in_the_runtime_agent() -> None:
    """A warm engine; one call holds its memory (a few real milliseconds at this time
    scale) while two more queue: the urgent one, sent last, is admitted first."""
    agent = ServerAgent(CLUSTER, 0, time_scale=0.01)
    big = kv_capacity() - 100

    def spec(name: str, priority: float, prompt: int = big) -> TaskSpec:
        return TaskSpec(0, name, 0, "llm", MODEL, prompt, 20, 0.0, 0.0, (), priority=priority)

    async def run_all() -> list[tuple[dict[str, Any], Any]]:
        await agent.run(spec("warm", 0.0, prompt=100))  # loads the model
        calls = []
        for name, priority in [("first", 0.0), ("late", 5.0), ("urgent", 1.0)]:
            calls.append(asyncio.ensure_future(agent.run(spec(name, priority))))
            await asyncio.sleep(0)  # each joins the queue before the next is sent
        return list(await asyncio.gather(*calls))

    (first, _), (late, _), (urgent, _) = asyncio.run(run_all())
    assert first["start"] < urgent["start"] < late["start"]
