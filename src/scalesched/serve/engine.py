"""An emulated OpenAI-compatible LLM engine: ``scalesched engine`` and ``scalesched fleet``.

Each served model is one continuous batch timed by the project's engine arithmetic
(:class:`~scalesched.kernel.llm_engine.EngineBatch` over the cost model of
``cluster/perf.py``): a request waits in FIFO order (or by the body's ``priority``, lower
first, as the simulator orders a ``Place`` priority) until the batch has a slot and KV
memory for ``prompt + max_tokens`` tokens, prefills for ``perf.prefill_s(prompt)``, then
decodes one token per step of the batch as it stands (``step_s``), every decoding request
sharing each step. Model seconds are multiplied by ``time_scale`` to wall seconds; a
``time_scale`` of 0 answers at once (an "instant" engine: what a gateway benchmark compares
against). It always generates exactly ``max_tokens`` tokens, and exposes vLLM-named
Prometheus gauges so that a gateway reads it as it reads vLLM.

Library: aiohttp, for the engine's and the gateway's servers and the load generator's
client. One well-kept asyncio package gives server, streaming responses and an HTTP client
with connection pooling; a Starlette/uvicorn stack would need a second library (httpx) for
the client side and an ASGI server process model that fits many engines in one process
worse. (The gateway's own calls to its backends, and its plain calls' reading, are
hand-written for CPU per call: :mod:`scalesched.serve.upstream`, :mod:`scalesched.serve.front`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from scalesched.cluster.catalog import SERVER_TYPES, can_host
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.perf import MODELS
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.errors import InputError
from scalesched.kernel.llm_engine import EngineBatch, queue_by_priority
from scalesched.serve.fleet import backends_yaml as backends_yaml  # where callers find them
from scalesched.serve.fleet import fleet_servers as fleet_servers
from scalesched.serve.protocol import NO_PRIORITY, BadRequest, CompletionRequest, parse_request, sse
from scalesched.serve.site import (
    add_openai_routes,
    bad_request,
    failure,
    new_app,
    read_json,
    run_apps,
)
from scalesched.serve.site import start_site as start_site  # where tests and tools find it

MIN_SLEEP_S = 0.01
"""Shortest wall sleep of the step loop: faster steps are taken several at a time (the
same tokens at the same times at chunk ends, fewer wake-ups and fewer chunks to stream:
what keeps a fleet of engines, a gateway and a load generator on a few CPU cores in model
time). A request's first chunk may come up to this much wall time after its first step."""


@dataclass(eq=False)
class _Request:
    prompt: int
    output: int
    left: int
    admitted: asyncio.Future[None]
    priority: float = NO_PRIORITY
    tokens: asyncio.Queue[int | None] = field(default_factory=asyncio.Queue)
    state: str = "waiting"  # waiting -> admitted -> decoding -> done


class _PriorityOf:
    """``queue_by_priority``'s lookup of a queued request's priority: its own attribute."""

    def __getitem__(self, req: _Request) -> float:
        return req.priority


_PRIORITY_OF = _PriorityOf()


class EmulatedModel:
    """One model's continuous batch on one server, advanced by its own step loop."""

    def __init__(self, tables: ClusterTables, klass: int, model: str, time_scale: float) -> None:
        self.model = model
        self.batch = EngineBatch(tables, klass)
        self.time_scale = time_scale
        self.waiting: deque[_Request] = deque()
        self.decoding: list[_Request] = []
        self._joining: list[_Request] = []
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.late_s_max = 0.0
        self.late_s_sum = 0.0
        self.wakeups = 0
        """How late (wall s) the step loop's wake-ups came: what a starved CPU costs. The
        virtual clock makes up for it, so it delays a chunk, never the model."""

    @property
    def running(self) -> int:
        return self.batch.n_active

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.batch.kv_used / max(self.batch.kv_cap, 1))

    async def generate(
        self, prompt: int, output: int, priority: float = NO_PRIORITY
    ) -> AsyncGenerator[int, None]:
        """Yield the numbers of tokens produced, as the steps produce them (sum: output).
        The request queues behind those with a smaller or equal ``priority`` (arrival order
        among equals; NO_PRIORITY: behind all), ahead of those with a larger one."""
        self.prompt_tokens_total += prompt
        if self.time_scale == 0:
            self.generation_tokens_total += output
            yield output
            return
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._step_loop())
        req = _Request(prompt, output, output, asyncio.get_running_loop().create_future(), priority)
        if priority == NO_PRIORITY:
            self.waiting.append(req)
        else:
            queue_by_priority(self.waiting, req, priority, _PRIORITY_OF)
        self._admit()
        try:
            await req.admitted
            await asyncio.sleep(self.batch.perf.prefill_s(prompt) * self.time_scale)
            req.state = "joining"
            self._joining.append(req)
            self._wake.set()
            while (k := await req.tokens.get()) is not None:
                self.generation_tokens_total += k
                yield k
        finally:
            self._leave(req)

    def _admit(self) -> None:
        while self.waiting and self.batch.fits(self.waiting[0].prompt, self.waiting[0].output):
            req = self.waiting.popleft()
            self.batch.admit(req.prompt, req.output)
            req.state = "admitted"
            req.admitted.set_result(None)

    def _leave(self, req: _Request) -> None:
        """The request ended or its client went away: free what it held."""
        if req.state == "waiting":
            self.waiting.remove(req)
            return
        if req.state == "joining":
            self._joining.remove(req)
        elif req.state == "decoding":
            self.decoding.remove(req)
            self.batch.stop_decoding(req.prompt, req.output)
        self.batch.release(req.prompt, req.output)
        req.state = "gone"
        self._admit()

    async def _step_loop(self) -> None:
        """Decode on a virtual clock that keeps model time, not wake-up time: each wake-up
        produces the steps the elapsed wall time is worth at the batch as it stands (at
        most up to the next request's end, where the batch changes), so an emulator
        starved of CPU streams in bigger chunks rather than slowing its model down."""
        loop = asyncio.get_running_loop()
        clock = loop.time()  # wall time the steps produced so far reach
        while True:
            if self._joining:
                for req in self._joining:
                    self.batch.start_decoding(req.prompt, req.output)
                    req.state = "decoding"
                self.decoding.extend(self._joining)
                self._joining.clear()
            if not self.decoding:
                self._wake.clear()
                await self._wake.wait()
                clock = loop.time()
                continue
            step = self.batch.step_s() * self.time_scale
            fewest = min(r.left for r in self.decoding)
            want = max(1, min(fewest, math.ceil(MIN_SLEEP_S / step))) if step > 0 else fewest
            target = clock + step * want
            await asyncio.sleep(max(0.0, target - loop.time()))
            now = loop.time()
            late = max(0.0, now - target)
            self.late_s_max, self.late_s_sum = max(self.late_s_max, late), self.late_s_sum + late
            self.wakeups += 1
            due = math.floor((now - clock) / step) if step > 0 else fewest
            k = max(1, min(fewest, due))
            clock += step * k
            self._produce(k)

    def _produce(self, k: int) -> None:
        """Every decoding request gets ``k`` more tokens; those that reach their end leave
        the batch."""
        for req in list(self.decoding):
            req.left -= k
            req.tokens.put_nowait(k)
            if req.left <= 0:
                self.decoding.remove(req)
                self.batch.stop_decoding(req.prompt, req.output)
                req.state = "finished"
                req.tokens.put_nowait(None)

    def close(self) -> None:
        if self._loop_task is not None:
            self._loop_task.cancel()


def server_of_type(server_type: str, name: str = "engine") -> ServerSpec:
    """A server of a catalog type (an InputError naming --server-type when unknown)."""
    if server_type not in SERVER_TYPES:
        known = ", ".join(SERVER_TYPES)
        raise InputError("--server-type", "server-type", f"unknown {server_type!r}; known: {known}")
    spec = SERVER_TYPES[server_type].instance(0)
    return ServerSpec(
        name,
        spec.type,
        spec.gpu_type,
        spec.gpus,
        spec.cpu_cores,
        spec.core_speed,
        spec.nic_gbps,
        spec.load_gbs,
    )


class EngineServer:
    """The HTTP face of one emulated server: one :class:`EmulatedModel` per served model.

    ``models`` maps served names (what clients send) to catalog names. ``tables``: the
    tables of a whole cluster the server is part of (by name), e.g. under a deployment, so
    that each model runs the very engine the simulator runs there (a pinned replica group:
    its tensor-parallel degree, GPU share and replica count); without them, each model
    runs as dynamic residency would load it on this server alone (the smallest
    tensor-parallel degree that fits, the server's GPUs to itself)."""

    def __init__(
        self,
        server: ServerSpec,
        models: dict[str, str],
        time_scale: float,
        tables: ClusterTables | None = None,
    ) -> None:
        if not time_scale >= 0 or not math.isfinite(time_scale):
            raise InputError("--time-scale", "time-scale", "must be a finite number >= 0")
        if tables is None:
            tables, index = ClusterTables(ClusterSpec(server.name, (server,))), 0
        else:
            index = tables.names.index(server.name)
        self.server = server
        self.models: dict[str, EmulatedModel] = {}
        for served, catalog in models.items():
            klass = (
                int(tables.engine_class[index, MODEL_INDEX[catalog]]) if catalog in MODELS else -1
            )
            if klass < 0 or not can_host(server, catalog):
                raise InputError("--model", "model", f"{catalog} cannot run on {server.type}")
            self.models[served] = EmulatedModel(tables, klass, catalog, time_scale)
        self.created = int(time.time())

    def app(self) -> web.Application:
        app = new_app()
        add_openai_routes(
            app,
            chat=self._chat,
            completions=self._completions,
            models=self._list_models,
            health=self._health,
            metrics=self._metrics,
        )
        app.on_cleanup.append(self._close)
        return app

    async def _close(self, _app: web.Application) -> None:
        for model in self.models.values():
            model.close()

    async def _health(self, _request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _list_models(self, _request: web.Request) -> web.Response:
        data = [
            {"id": name, "object": "model", "created": self.created, "owned_by": "scalesched"}
            for name in self.models
        ]
        return web.json_response({"object": "list", "data": data})

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(text=self.metrics_text(), content_type="text/plain")

    def metrics_text(self) -> str:
        """Prometheus text with vLLM's metric names, one series per served model."""
        gauges = {
            "vllm:num_requests_running": lambda m: m.running,
            "vllm:num_requests_waiting": lambda m: len(m.waiting),
            "vllm:kv_cache_usage_perc": lambda m: m.kv_usage,
            "vllm:gpu_cache_usage_perc": lambda m: m.kv_usage,
            "vllm:prompt_tokens_total": lambda m: m.prompt_tokens_total,
            "vllm:generation_tokens_total": lambda m: m.generation_tokens_total,
            "scalesched_emulator_late_seconds_max": lambda m: m.late_s_max,
            "scalesched_emulator_late_seconds_total": lambda m: m.late_s_sum,
            "scalesched_emulator_wakeups_total": lambda m: m.wakeups,
        }
        lines = []
        for metric, read in gauges.items():
            kind = "counter" if metric.endswith("_total") else "gauge"
            lines.append(f"# TYPE {metric} {kind}")
            for name, model in self.models.items():
                lines.append(f'{metric}{{model_name="{name}"}} {float(read(model))}')
        return "\n".join(lines) + "\n"

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=True)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, chat=False)

    async def _complete(self, request: web.Request, chat: bool) -> web.StreamResponse:
        try:
            _raw, body = await read_json(request)
            req = parse_request(body, chat)
            model = self.models.get(req.model)
            if model is None:
                raise BadRequest(
                    f"the model {req.model!r} does not exist",
                    status=404,
                    param="model",
                    code="model_not_found",
                )
        except BadRequest as exc:
            return bad_request(request, exc)
        try:
            rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
            if req.stream:
                return await self._stream(request, req, model, rid)
            produced = 0
            async for k in model.generate(req.prompt_tokens, req.max_tokens, req.priority):
                produced += k
            return web.json_response(_completion(req, rid, produced))
        except Exception as exc:  # a bug: one log line and an OpenAI 500, not a traceback
            return failure(request, exc)

    async def _stream(
        self, request: web.Request, req: CompletionRequest, model: EmulatedModel, rid: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        produced = 0
        try:
            # Closed on leaving the block, so a client gone mid-stream frees its batch slot
            # and KV memory at once (not when the generator is collected).
            tokens = model.generate(req.prompt_tokens, req.max_tokens, req.priority)
            async with contextlib.aclosing(tokens):
                async for k in tokens:
                    produced += k
                    await response.write(sse(_chunk(req, rid, _text(k), None)))
            await response.write(sse(_chunk(req, rid, "", "length")))
            if req.include_usage:
                usage = _chunk(req, rid, "", None)
                usage["choices"] = []
                usage["usage"] = _usage(req, produced)
                await response.write(sse(usage))
            await response.write(sse("[DONE]"))
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away: nothing to answer, nothing to log
        return response


def _text(tokens: int) -> str:
    return "tok " * tokens


def _usage(req: CompletionRequest, produced: int) -> dict[str, int]:
    return {
        "prompt_tokens": req.prompt_tokens,
        "completion_tokens": produced,
        "total_tokens": req.prompt_tokens + produced,
    }


def _completion(req: CompletionRequest, rid: str, produced: int) -> dict[str, Any]:
    text = _text(produced)
    choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
    if req.chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": rid,
        "object": "chat.completion" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [choice],
        "usage": _usage(req, produced),
    }


def _chunk(req: CompletionRequest, rid: str, text: str, finish: str | None) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if req.chat:
        choice["delta"] = {"content": text} if text else {}
    else:
        choice["text"] = text
    return {
        "id": rid,
        "object": "chat.completion.chunk" if req.chat else "text_completion",
        "created": int(time.time()),
        "model": req.model,
        "choices": [choice],
    }


# -- running engines -----------------------------------------------------------------------


def run_engines(
    engines: list[EngineServer],
    host: str,
    port: int,
    ready: Callable[[list[str]], None] | None = None,
) -> None:
    """Blocking: serve ``engines`` (one process, consecutive ports from ``port``) until
    interrupted; ``ready`` gets their base URLs once every one listens. A port that cannot
    be bound is an InputError naming it, raised after the engines already listening are
    closed (nothing is left half started)."""
    run_apps([e.app() for e in engines], host, port, ready)
