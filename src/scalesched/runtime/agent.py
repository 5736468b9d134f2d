"""What runs on each node: the server agent, an async Ray actor pinned to its node.

The driver creates one agent per server with ``NodeAffinitySchedulingStrategy(node_id,
soft=False)``; a task placed on server ``s`` is a call of agent ``s`` (or, for Python tool
functions, a Ray task pinned to the same node, see ``python_tool``). An agent executes:

* emulated tasks, which take as long as the cost model says on this server, scaled by
  ``time_scale`` (0.01: one model second is 10 ms of wall time):

  - inputs land after ``latency + bytes / min(NIC)`` from each parent's server (free on
    the same server), as in the simulator;
  - a tool holds one of the server's cores (FIFO) for ``cpu_work / core_speed``, then
    waits ``ext_latency`` holding nothing;
  - an LLM request needs its model's engine: a model that is not resident is loaded
    (``weights / load_gbs``) after evicting least-recently-used idle engines, or waits
    for GPUs; requests are admitted FIFO while the batch cap and KV memory allow, then
    take ``prefill(prompt) + output x decode_step(batch, contexts)`` with the batch and
    contexts **taken at admission** (the simulator re-times the batch at every event:
    see docs/runtime.md for this gap); admission, step times and eviction are
    ``kernel.llm_engine``'s, the simulator's own code;

* LLM requests sent to a real OpenAI-compatible endpoint (``backends.OpenAIClient``);
* Python LLM tasks of the decorator API (the function builds the prompt, the backend
  answers).

Every call returns ``(meta, value)``: ``meta`` holds the wall-clock timestamps, whether a
model was loaded and a snapshot of the server's engines for the driver's view.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalesched.cluster.deployment import Deployment
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import MODEL_INDEX, MODEL_NAMES, ClusterTables
from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY
from scalesched.kernel.llm_engine import EngineBatch, lru_evictions, queue_by_priority


class EmulatedFault(RuntimeError):
    """A failure injected by ``fail_rate`` (tests and demos of retries)."""


async def sleep_at_least(seconds: float) -> None:
    """Sleep ``seconds`` of wall time or a little more, never less. Ray runs actors on
    uvloop, whose timers count from the loop's cached clock in whole milliseconds, so one
    ``asyncio.sleep(0.010)`` after a busy moment measured 9.2 ms here: a tool's measured
    time then fell short of its cost model's (0.76x once). Sleeping again for what is left
    keeps the runtime's durations at or above the model's, as a real machine's are."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(left)


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """One attempt of one task, as the driver sends it to a node (truth included: the
    emulator needs the real output length and external latency; schedulers never see it)."""

    workflow: int
    task: str
    attempt: int
    kind: str
    model: str | None
    prompt_tokens: int
    output_tokens: int
    cpu_work: float
    ext_latency: float
    parents: tuple[tuple[int, float], ...]
    """(server index, bytes) of every input."""
    backend: str = "emulated"
    """``emulated``, ``http`` (an OpenAI-compatible endpoint) or ``python``."""
    max_tokens: int | None = None
    copy: int = 0
    """Which copy of a hedged task this is (0 when not hedged)."""
    priority: float = math.inf
    """Admission order at its engine (``Place.priority``): lower first; inf: arrival order."""

    @property
    def key(self) -> CallKey:
        """What names this call to its agent (``ServerAgent.cancel``)."""
        return (self.workflow, self.task, self.attempt, self.copy)


CallKey = tuple[int, str, int, int]


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Injected failures: each attempt fails with probability ``fail_rate`` (a hash of seed,
    workflow, task and attempt decides, so runs are reproducible); ``fail_tasks`` lists
    ``(workflow, task id)`` pairs whose every attempt fails."""

    fail_rate: float = 0.0
    seed: int = 0
    fail_tasks: frozenset[tuple[int, str]] = frozenset()

    def fails(self, spec: TaskSpec) -> bool:
        if (spec.workflow, spec.task) in self.fail_tasks:
            return True
        if self.fail_rate <= 0:
            return False
        key = f"{self.seed}/{spec.workflow}/{spec.task}/{spec.attempt}".encode()
        draw = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64
        return draw < self.fail_rate


class _Engine(EngineBatch):
    """One model's engine on this server: the shared batch model (``kernel.llm_engine``)
    plus what queues, loads and wakes its requests here."""

    def __init__(
        self,
        tables: ClusterTables,
        server: int,
        model: int,
        tp: int,
        *,
        state: int = ENGINE_LOADING,
        load_reported: bool = False,
    ) -> None:
        super().__init__(tables, int(tables.engine_class[server, model]))
        self.model, self.tp, self.state = model, tp, state
        self.users = 0
        """Requests waiting for, admitted to or loading this engine (evictable at 0)."""
        self.last_used = 0.0
        self.load_start = 0.0
        self.load_end = 0.0
        self.load_reported = load_reported
        """Whether a call has returned the load yet (the first one past it reports it)."""
        self.queue: deque[object] = deque()
        self.priority_of: dict[object, float] = {}
        """Each queued request's admission priority (``TaskSpec.priority``)."""
        self.ready = asyncio.Event()
        self.cond = asyncio.Condition()


class ServerAgent:
    """Executes the tasks placed on one server (see the module docstring)."""

    def __init__(
        self,
        spec: ClusterSpec,
        server: int,
        time_scale: float,
        faults: FaultConfig | None = None,
        endpoints: dict[str, Any] | None = None,
        deployment: Deployment | None = None,
    ) -> None:
        self.tables = ClusterTables(spec, deployment)
        self.server = server
        self.scale = float(time_scale)
        self.faults = faults or FaultConfig()
        t = self.tables
        self.cores = int(t.cores[server])
        self.speed = float(t.core_speed[server])
        self.free_gpus = int(t.gpus[server])
        self.engines: dict[int, _Engine] = {}
        self.model_loads = 0
        self._cores: asyncio.Semaphore | None = None
        self._cores_held = 0
        self._gpu_cond: asyncio.Condition | None = None
        self._loads: set[asyncio.Future[None]] = set()
        self._endpoints = endpoints or {}
        self._clients: dict[str, Any] = {}
        # Cancellation of hedged copies (``cancel``): the running call of each key, when it
        # began to hold a core or a batch slot, and the keys asked to stop.
        self._calls: dict[CallKey, asyncio.Task[Any]] = {}
        self._held_since: dict[CallKey, float] = {}
        self._stop: set[CallKey] = set()
        if t.pinned:  # a deployment: its replicas are resident from the start, never unloaded
            for m in np.flatnonzero(t.feasible[server]):
                tp = math.ceil(t.tp[server, m])
                eng = _Engine(t, server, int(m), tp, state=ENGINE_READY, load_reported=True)
                eng.ready.set()
                self.engines[int(m)] = eng
                self.free_gpus -= eng.tp

    # -- calls from the driver -------------------------------------------------------
    async def hello(self) -> tuple[int, str, int]:
        """(server index, Ray node id, pid): the driver checks the pinning with it."""
        import ray

        return self.server, ray.get_runtime_context().get_node_id(), os.getpid()

    async def run(self, spec: TaskSpec, *args: Any) -> tuple[dict[str, Any], Any]:
        """Execute one attempt; ``args`` are the resolved inputs of a Python task."""
        return await self._run(spec, None, args)

    async def run_python_llm(
        self, spec: TaskSpec, fn: Callable[..., Any], *args: Any
    ) -> tuple[dict[str, Any], Any]:
        """A decorator-API LLM task: ``fn(*args)`` builds the prompt, the backend answers."""
        return await self._run(spec, fn, args)

    async def cancel(self, key: CallKey) -> None:
        """Stop a hedged copy wherever it is (in transfer, queued, loading, running): it
        gives back its core or batch slot and KV memory, and its call returns at once with
        ``meta["cancelled"]`` and ``meta["held_s"]``, the model seconds it held a core or
        a batch slot. A copy not started yet returns so as soon as it starts."""
        self._stop.add(key)
        call = self._calls.get(key)
        if call is not None:
            call.cancel()

    async def in_use(self) -> dict[str, int]:
        """What this server's calls hold now: calls running, cores, LLM requests admitted
        or queued, engine uses (all 0 once its work is done or cancelled)."""
        engines = self.engines.values()
        return {
            "calls": len(self._calls),
            "cores": self._cores_held,
            "requests": sum(e.n_active + len(e.queue) for e in engines),
            "kv_tokens": sum(e.kv_used for e in engines),
            "engine_users": sum(e.users for e in engines),
        }

    # -- execution -------------------------------------------------------------------
    async def _run(
        self, spec: TaskSpec, fn: Callable[..., Any] | None, args: tuple[Any, ...]
    ) -> tuple[dict[str, Any], Any]:
        key = spec.key
        received = time.time()
        if key in self._stop:
            return self._cancelled(key, received), None
        call = asyncio.current_task()
        if call is not None:
            self._calls[key] = call
        try:
            return await self._execute(spec, fn, args, received)
        except asyncio.CancelledError:
            if key not in self._stop:
                raise  # not ours (Ray is shutting the actor down): let it through
            return self._cancelled(key, received), None
        finally:
            self._calls.pop(key, None)
            self._held_since.pop(key, None)

    def _cancelled(self, key: CallKey, received: float) -> dict[str, Any]:
        self._stop.discard(key)
        since = self._held_since.get(key)
        held = (time.time() - since) / self.scale if since is not None else 0.0
        return {
            "server": self.server,
            "cancelled": True,
            "held_s": held,
            "received": received,
            **self.snapshot(),
        }

    async def _execute(
        self, spec: TaskSpec, fn: Callable[..., Any] | None, args: tuple[Any, ...], received: float
    ) -> tuple[dict[str, Any], Any]:
        delay = self._transfer_s(spec)
        if delay > 0:
            await sleep_at_least(delay * self.scale)
        landed = time.time()
        if self.faults.fails(spec):
            raise EmulatedFault(f"injected failure of {spec.task} (attempt {spec.attempt})")
        loaded: tuple[float, float] | None = None
        value: Any = None
        if spec.kind == "llm":
            prompt = fn(*args) if fn is not None else None
            start, loaded, value = await self._llm(spec, prompt)
        else:
            start = await self._tool(spec)
        meta = {
            "server": self.server,
            "received": received,
            "landed": landed,
            "start": start,
            "end": time.time(),
            "loaded": loaded,
            **self.snapshot(),
        }
        return meta, value

    def _transfer_s(self, spec: TaskSpec) -> float:
        t, dst = self.tables, self.server
        delay = 0.0
        for src, nbytes in spec.parents:
            if src == dst or nbytes <= 0:
                continue
            bw = min(t.nic_bytes_per_s[src], t.nic_bytes_per_s[dst])
            delay = max(delay, t.latency_s + nbytes / bw)
        return delay

    async def _tool(self, spec: TaskSpec) -> float:
        if self._cores is None:
            self._cores = asyncio.Semaphore(self.cores)
        if spec.cpu_work > 0:
            async with self._cores:
                start = self._held_since[spec.key] = time.time()
                self._cores_held += 1
                try:
                    await sleep_at_least(spec.cpu_work / self.speed * self.scale)
                finally:
                    self._cores_held -= 1
            # Waiting on the outside world holds nothing (a copy cancelled then costs 0).
            self._held_since.pop(spec.key, None)
        else:
            start = time.time()
        if spec.ext_latency > 0:
            await sleep_at_least(spec.ext_latency * self.scale)
        return start

    async def _llm(
        self, spec: TaskSpec, prompt: str | None
    ) -> tuple[float, tuple[float, float] | None, Any]:
        m = MODEL_INDEX[spec.model or ""]
        eng, loaded = await self._engine(m)
        load = (eng.load_start, eng.load_end) if loaded else None
        try:
            if spec.backend == "http":
                start = time.time()
                value = await self._http(spec, prompt)
                return start, load, value
            start = await self._decode(eng, spec)
            value = None if prompt is None else f"[emulated {spec.model}: {spec.output_tokens} tok]"
            return start, load, value
        finally:
            await self._release(eng)

    async def _engine(self, m: int) -> tuple[_Engine, bool]:
        """The engine of model ``m``, loading it first if needed; holds one use of it.
        Returns whether this call reports the load (the first call past it does)."""
        eng = self.engines.get(m)
        if eng is None:
            t, s = self.tables, self.server
            if not t.feasible[s, m]:
                raise RuntimeError(f"server {t.names[s]} cannot run model {MODEL_NAMES[m]}")
            eng = _Engine(t, s, m, int(t.tp[s, m]))
            self.engines[m] = eng
            # The load runs as its own task: a cancelled request leaves it going.
            load = asyncio.ensure_future(self._load(eng))
            self._loads.add(load)  # held until done (the loop keeps weak references only)
            load.add_done_callback(self._loads.discard)
        eng.users += 1
        try:
            await eng.ready.wait()
        except asyncio.CancelledError:
            await self._release(eng)
            raise
        loaded = not eng.load_reported
        eng.load_reported = True
        return eng, loaded

    async def _load(self, eng: _Engine) -> None:
        t, s, m = self.tables, self.server, eng.model
        if self._gpu_cond is None:
            self._gpu_cond = asyncio.Condition()
        async with self._gpu_cond:
            await self._gpu_cond.wait_for(lambda: self._make_room(eng.tp))
            self.free_gpus -= eng.tp
        self.model_loads += 1
        eng.load_start = time.time()
        await sleep_at_least(float(t.load_s[s, m]) * self.scale)
        eng.load_end = time.time()
        eng.state = ENGINE_READY
        eng.ready.set()

    async def _release(self, eng: _Engine) -> None:
        """One use of ``eng`` ends; an engine left unused may be evicted for another."""
        eng.users -= 1
        eng.last_used = time.time()
        if eng.users == 0:
            await self._notify_gpus()

    def _make_room(self, need: int) -> bool:
        if self.free_gpus >= need:
            return True
        idle = [e for e in self.engines.values() if e.state == ENGINE_READY and e.users == 0]
        victims = lru_evictions(self.free_gpus, need, idle)
        if victims is None:
            return False
        for e in victims:
            del self.engines[e.model]
            self.free_gpus += e.tp
        return True

    async def _notify_gpus(self) -> None:
        if self._gpu_cond is not None:
            async with self._gpu_cond:
                self._gpu_cond.notify_all()

    async def _decode(self, eng: _Engine, spec: TaskSpec) -> float:
        """Wait for admission (in arrival order, or by ``spec.priority``), then hold the
        slot for the request's time with the batch as it stands at admission."""
        prompt, output = spec.prompt_tokens, spec.output_tokens
        token = object()

        def admissible() -> bool:
            return eng.queue[0] is token and eng.fits(prompt, output)

        async with eng.cond:
            eng.priority_of[token] = spec.priority
            queue_by_priority(eng.queue, token, spec.priority, eng.priority_of)
            try:
                await eng.cond.wait_for(admissible)
            except asyncio.CancelledError:  # a cancelled copy leaves the queue
                eng.queue.remove(token)
                del eng.priority_of[token]
                eng.cond.notify_all()
                raise
            eng.queue.popleft()
            del eng.priority_of[token]
            eng.admit(prompt, output)
            steps = eng.start_decoding(prompt, output)
            exec_s = eng.perf.prefill_s(prompt) + steps * eng.step_s()
            eng.cond.notify_all()
        start = self._held_since[spec.key] = time.time()
        try:
            await sleep_at_least(exec_s * self.scale)
        finally:
            async with eng.cond:
                eng.stop_decoding(prompt, output)
                eng.release(prompt, output)
                eng.cond.notify_all()
        return start

    async def _http(self, spec: TaskSpec, prompt: str | None) -> Any:
        from scalesched.runtime.backends import OpenAIClient, synthetic_prompt

        model = spec.model or ""
        client = self._clients.get(model)
        if client is None:
            cfg = self._endpoints.get(model)
            if cfg is None:
                raise RuntimeError(f"no LLM endpoint configured for model {model!r}")
            client = OpenAIClient.from_config(cfg, node_ip=_node_ip())
            self._clients[model] = client
        text = prompt if prompt is not None else synthetic_prompt(spec.prompt_tokens)
        max_tokens = spec.max_tokens or max(1, spec.output_tokens)
        return await asyncio.to_thread(client.complete, text, max_tokens)

    def snapshot(self) -> dict[str, Any]:
        """The engines of this server as the driver's view holds them."""
        states = [ENGINE_ABSENT] * len(MODEL_NAMES)
        idle = 0
        for m, e in self.engines.items():
            states[m] = e.state
            if e.state == ENGINE_READY and e.users == 0:
                idle += e.tp
        return {"engine_state": states, "free_gpus": self.free_gpus, "idle_gpus": idle}


def _node_ip() -> str:
    import ray

    return str(ray.util.get_node_ip_address())


def python_tool(
    spec: TaskSpec, time_scale: float, fn: Callable[..., Any], *args: Any
) -> tuple[dict[str, Any], Any]:
    """A decorator-API tool task: the body of the Ray task pinned to the chosen node.

    Inputs land (emulated transfer), then ``fn(*args)`` runs for real in this worker,
    holding the one logical CPU the task asked Ray for."""
    import ray

    received = time.time()
    # The transfer is emulated like in the agent (the real objects move too, via Ray).
    landed = received
    start = time.time()
    value = fn(*args)
    end = time.time()
    node = ray.get_runtime_context().get_node_id()
    return {
        "received": received,
        "landed": landed,
        "start": start,
        "end": end,
        "loaded": None,
        "node": node,
    }, value


def vehicle_task(
    spec: TaskSpec, agents: dict[str, Any], fn: Callable[..., Any] | None, *args: Any
) -> tuple[dict[str, Any], Any]:
    """A task as a plain Ray task: it runs on the node Ray (or the pinning) gave it and has
    that node's agent execute it, holding its Ray resources meanwhile."""
    import ray

    agent = agents[ray.get_runtime_context().get_node_id()]
    if fn is None:
        refs = agent.run.options(num_returns=2).remote(spec, *args)
    else:
        refs = agent.run_python_llm.options(num_returns=2).remote(spec, fn, *args)
    meta, value = ray.get(refs)
    return meta, value


__all__ = [
    "ENGINE_LOADING",
    "EmulatedFault",
    "FaultConfig",
    "ServerAgent",
    "TaskSpec",
    "python_tool",
    "vehicle_task",
]
