"""``scalesched serve``: a workflow-aware OpenAI-compatible gateway in front of engines.

Every request is placed by a scalesched policy through the one decision cycle
(:func:`scalesched.decision.cycle.drive`): the gateway is a *pushing* executor. A request
joins ``pending``; ``drive`` asks ``next_decision`` (the head's :class:`Decision`, built on
:class:`~scalesched.serve.state.GatewayState`), the policy answers, ``apply`` books the
placement and wakes the request's handler, which forwards it. A ``Defer`` answer parks the
request until another one ends (``can_defer`` is False when nothing is in flight, so it
never starves); a ``Hedge`` is sent to its first server only (a gateway does not duplicate
calls). A policy that raises, or answers a closed server, is replaced for that decision
by the fallback heuristic, counted in ``/metrics``.

Faults: a backend that refuses connections, breaks mid-response or sends nothing for its
``idle_timeout_s`` on a streamed call is masked until its ``/metrics`` answers again
(scraped every ``scrape_s``). An upstream 5xx, a body that is not JSON, or a streamed
call answered with something other than events is a failed attempt too. A request that
has not started streaming to its client is retried on another backend (up to
``max_attempts`` backends), else answered 502; a stream already started ends with an
OpenAI-shaped error event and ``[DONE]``. A backend that fails ``trip_after`` calls in a row
is held out of decisions for a back-off (doubling per failed trial), so calls stop paying
a failed attempt there first. Every failed call is counted under an outcome other than
``ok`` in ``/metrics``. Bad bodies and unknown models are refused with OpenAI-shaped 4xx,
a model whose backends are all closed with 503 and ``Retry-After``; more than
``max_pending`` requests at once get 429 with ``Retry-After``. Each fault is one log line
(:mod:`scalesched.serve.site`). None of this costs a well-answered call more than a list
lookup: holds end on timers, timeouts are built once per backend, and only a stream's
first chunk is checked.

Admission priorities: a policy's ``Place(server, priority=p)`` orders the backend engine's
queue in the simulator; here it reaches a backend only where ``forward_priority`` names it
(``serve --forward-priority``), as the integer body field ``priority``
(:func:`~scalesched.serve.protocol.wire_priority`), which vLLM honours under
``--scheduling-policy priority``. Elsewhere the body goes upstream as the client sent it.

Library: aiohttp's server (see :mod:`scalesched.serve.engine`), with a plain non-streamed
call read and answered in front of it (:mod:`scalesched.serve.front`, :meth:`Gateway.quick`);
the backends are called through :mod:`scalesched.serve.upstream` (keep-alive connections
per backend); each module says why it is hand-written. prometheus-client for ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import math
import os
import re
import time
import uuid
from collections import deque
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import aiohttp
import numpy as np
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from scalesched.cluster.deployment import Deployment
from scalesched.cluster.endpoints import BackendEntry
from scalesched.decision.actions import Defer, Hedge, Place, as_action
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision, TaskRequest
from scalesched.decision.scheduler import Scheduler
from scalesched.errors import InputError
from scalesched.serve.front import FrontRequest
from scalesched.serve.protocol import (
    PRIORITY_FIELD,
    BadRequest,
    CompletionRequest,
    TaskSignals,
    error_body,
    parse_request,
    sse,
    task_signals,
    wire_priority,
)
from scalesched.serve.site import (
    FRONT,
    LISTENING,
    add_openai_routes,
    bad_request,
    describe,
    failure,
    log,
    new_app,
    read_json,
    refusal,
)
from scalesched.serve.state import GatewayState
from scalesched.serve.upstream import Connection, Deadline, IdleTimeout, Pool, UpstreamError

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
DECISION_BUCKETS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1)
_LOAD_SAMPLE = re.compile(
    r"^vllm:num_requests_(?:running|waiting)(?:\{(?P<labels>.*)\})?[ \t]+(?P<value>\S+)",
    re.MULTILINE,
)
_LABEL = re.compile(r'\s*(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPE = re.compile(r"\\(.)")


OK = "ok"
"""The ``outcome`` of a call answered in full (``scalesched_gateway_requests_total``); the
others: ``error`` (a failed attempt), ``broken_stream`` (the backend failed mid-stream),
``client_gone`` (the client left mid-stream), ``rejected`` (a backend's 4xx, passed on)."""
TRIP_AFTER = 3
"""Failed calls in a row after which a backend is held out of decisions for a back-off."""
BACKOFF_S = 1.0
"""The first hold's length; each next one (a failed trial call) doubles it."""
MAX_BACKOFF_S = 60.0
"""The longest hold."""


class NoBackend(Exception):
    """No healthy backend serves the request's model (or all were tried)."""


class GuardedScheduler:
    """A policy with a fallback: when the policy raises or answers a server the decision
    does not allow, the fallback answers instead and ``on_fallback(reason)`` is called."""

    def __init__(self, primary: Scheduler, fallback: Scheduler, on_fallback: Any) -> None:
        self.primary, self.fallback, self.on_fallback = primary, fallback, on_fallback
        self.name = primary.name
        self.ready_order = primary.ready_order

    def reset(self, seed: int) -> None:
        self.primary.reset(seed)
        self.fallback.reset(seed)

    def supports(self, n_servers: int) -> bool:
        return self.primary.supports(n_servers)

    def unsupported_reason(self, n_servers: int) -> str | None:
        return self.primary.unsupported_reason(n_servers)

    def select(self, decision: Decision) -> Any:
        try:
            answer = self.primary.select(decision)
            if _allowed(answer, decision):
                return answer
            reason = "invalid"
        except Exception:  # a policy bug must not take the gateway down
            log.exception("policy %s failed; falling back", self.name)
            reason = "error"
        self.on_fallback(reason)
        return self.fallback.select(decision)


def _allowed(answer: Any, decision: Decision) -> bool:
    try:
        action = as_action(answer)
    except (TypeError, ValueError):
        return False
    if isinstance(action, Defer):
        return decision.can_defer
    servers = action.servers if isinstance(action, Hedge) else (action.server,)
    return all(0 <= s < decision.n_servers and bool(decision.mask[s]) for s in servers)


Placement = tuple[int, float, float | None]
"""Where a request goes: the server, its estimated time there (booked until it ends) and
the policy's admission priority for it (None: none given)."""


@dataclass(eq=False)
class WaitingRequest:
    served: str
    task: TaskRequest
    excluded: tuple[int, ...]
    placed: asyncio.Future[Placement]


@dataclass
class GatewayMetrics:
    """The gateway's Prometheus series (one registry per gateway)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.requests = Counter(
            "scalesched_gateway_requests", "Requests forwarded", ["backend", "outcome"], registry=r
        )
        self.refused = Counter(
            "scalesched_gateway_refused", "Requests refused by the gateway", ["reason"], registry=r
        )
        self.latency = Histogram(
            "scalesched_gateway_latency_seconds",
            "Request latency",
            ["backend"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.ttft = Histogram(
            "scalesched_gateway_ttft_seconds",
            "Time to first streamed byte",
            ["backend"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.decisions = Counter(
            "scalesched_gateway_decisions", "Placements per policy", ["policy"], registry=r
        )
        self.fallbacks = Counter(
            "scalesched_gateway_fallbacks",
            "Decisions the fallback made",
            ["policy", "reason"],
            registry=r,
        )
        self.decision_time = Histogram(
            "scalesched_gateway_decision_seconds",
            "Time to place the waiting requests (decision, policy, booking), per pass",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.retries = Counter(
            "scalesched_gateway_retries", "Attempts retried elsewhere", ["backend"], registry=r
        )
        self.priorities = Counter(
            "scalesched_gateway_priorities_forwarded",
            "Requests sent with the policy's admission priority",
            ["backend"],
            registry=r,
        )
        # Read when /metrics is scraped (``set_function``), not set on every request.
        self.in_flight = Gauge(
            "scalesched_gateway_in_flight", "Requests in the gateway", registry=r
        )
        self.queue = Gauge(
            "scalesched_gateway_queue_depth", "Requests waiting for placement", registry=r
        )
        self.healthy = Gauge(
            "scalesched_gateway_backend_healthy",
            "1 when a backend is open",
            ["backend"],
            registry=r,
        )


class Gateway:
    """The executor: pending requests, the live state, the forwarding."""

    def __init__(
        self,
        backends: Sequence[BackendEntry],
        scheduler: Scheduler,
        fallback: Scheduler,
        *,
        time_scale: float = 1.0,
        max_pending: int = 4096,
        max_attempts: int = 3,
        scrape_s: float = 1.0,
        seed: int = 0,
        deployment: Deployment | None = None,
        backends_source: str = "backends",
        forward_priority: Iterable[str] = (),
        trip_after: int = TRIP_AFTER,
        backoff_s: float = BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
    ) -> None:
        self.backends = list(backends)
        self._forward_priority = _forwarding(self.backends, forward_priority)
        """Per backend: whether its requests carry the policy's priority."""
        self.state = GatewayState(self.backends, time_scale, backends_source, deployment)
        self.metrics = GatewayMetrics()
        self.policy_name = scheduler.name
        self.scheduler = GuardedScheduler(scheduler, fallback, self._fell_back)
        self.scheduler.reset(seed)
        self.max_pending, self.max_attempts, self.scrape_s = max_pending, max_attempts, scrape_s
        self.trip_after, self.backoff_s, self.max_backoff_s = trip_after, backoff_s, max_backoff_s
        self.pending: deque[WaitingRequest] = deque()
        self.deferred: list[WaitingRequest] = []
        self._current: tuple[WaitingRequest, Decision] | None = None
        self.in_flight = 0
        # A call that names no workflow is one of its own: this process's random prefix and
        # a count (a uuid4 per call cost more than the rest of the id handling).
        self._anonymous = f"call-{uuid.uuid4().hex[:16]}-"
        self._calls = itertools.count()
        self._pools: list[Pool] = []
        """Per backend, its keep-alive connections (made when the app starts)."""
        self._scraper: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop the app runs on (set at its start; looked up once, not per call)."""
        n = len(self.backends)
        # A backend is open (``state.healthy``) when it is up and not held: up is what its
        # /metrics says (and a broken connection until the next scrape); held is the
        # back-off after ``trip_after`` failed calls in a row, ended by a timer.
        self._up = [True] * n
        self._held = [False] * n
        self._fails = [0] * n
        """Failed calls in a row (reset by an answered one)."""
        self._backoff = [0.0] * n
        """The last hold's length (0: none since the last answered call); doubles per hold."""
        self._held_until = [0.0] * n
        self._timers: list[asyncio.TimerHandle | None] = [None] * n
        self._urls = [b.endpoint.base_url.rstrip("/") for b in self.backends]
        # Each backend's request paths (its base URL's path, then the endpoint's).
        bases = [urlsplit(u).path for u in self._urls]
        self._paths = [
            {path: base + path for path in ("/chat/completions", "/completions")} for base in bases
        ]
        self._metrics_paths = [
            (base[: -len("/v1")] if base.endswith("/v1") else base) + "/metrics" for base in bases
        ]
        self._headers = [{"Content-Type": "application/json", **_auth(b)} for b in self.backends]
        # The per-request series, labelled once: a ``labels()`` lookup costs a few
        # microseconds on every request otherwise.
        m = self.metrics
        self._ok = [m.requests.labels(b.name, OK) for b in self.backends]
        self._latency = [m.latency.labels(b.name) for b in self.backends]
        self._ttft = [m.ttft.labels(b.name) for b in self.backends]
        self._prioritized = [m.priorities.labels(b.name) for b in self.backends]
        self._decided = m.decisions.labels(self.policy_name)
        self._healthy = [m.healthy.labels(b.name) for b in self.backends]
        for gauge in self._healthy:
            gauge.set(1)
        m.in_flight.set_function(lambda: self.in_flight)
        m.queue.set_function(lambda: len(self.pending) + len(self.deferred))

    # -- the executor protocol (driven by scalesched.decision.cycle.drive) ----------------
    def next_decision(self) -> Decision | None:
        """The head request's decision; None when none waits. A request no open backend
        can take is failed here (its handler answers 503)."""
        while self.pending:
            w = self.pending[0]
            decision = self.state.decide(w.served, w.task, w.excluded)
            if decision.mask.any():
                decision.can_defer = self.in_flight > len(self.pending) + len(self.deferred)
                self._current = (w, decision)
                return decision
            self.pending.popleft()
            w.placed.set_exception(NoBackend(w.served))
        return None

    def apply(self, answer: Any) -> None:
        assert self._current is not None
        w, decision = self._current
        self._current = None
        self.pending.popleft()
        action = as_action(answer)
        if isinstance(action, Defer):
            self.deferred.append(w)
            return
        server = action.servers[0] if isinstance(action, Hedge) else action.server
        priority = action.priority if isinstance(action, Place) else None
        est = float(decision.exec_s[server])
        self.state.place(w.task, server, est)
        self._decided.inc()
        w.placed.set_result((server, est, priority))

    def _fell_back(self, reason: str) -> None:
        self.metrics.fallbacks.labels(self.policy_name, reason).inc()

    async def _place(self, served: str, task: TaskRequest, excluded: tuple[int, ...]) -> Placement:
        assert self._loop is not None
        w = WaitingRequest(served, task, excluded, self._loop.create_future())
        self.pending.append(w)
        self._drive()
        return await w.placed

    def _drive(self) -> None:
        t0 = time.perf_counter()
        drive(self, self.scheduler)
        self.metrics.decision_time.observe(time.perf_counter() - t0)

    def _ended(self, task: TaskRequest, server: int, est: float) -> None:
        self.state.release(task, server, est)
        if self.deferred:  # capacity was freed: offer the deferred requests again
            self.pending.extend(self.deferred)
            self.deferred.clear()
            self._drive()

    # -- HTTP ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = new_app()
        add_openai_routes(
            app,
            chat=functools.partial(self._complete, path="/chat/completions", chat=True),
            completions=functools.partial(self._complete, path="/completions", chat=False),
            models=self._models,
            health=self._health,
            metrics=self._metrics,
        )
        app[LISTENING] = [self._start_scraping]
        app[FRONT] = self.quick
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        self._loop = asyncio.get_running_loop()
        self._pools = [Pool(u, h) for u, h in zip(self._urls, self._headers, strict=True)]

    def _start_scraping(self) -> None:
        self._scraper = asyncio.get_running_loop().create_task(self._scrape_loop())

    async def _stop(self, _app: web.Application) -> None:
        if self._scraper is not None:
            self._scraper.cancel()
        for timer in self._timers:
            if timer is not None:
                timer.cancel()
        for pool in self._pools:
            pool.close()

    async def _health(self, _request: web.Request) -> web.Response:
        open_ = int(self.state.healthy.sum())
        return web.json_response(
            {"status": "ok" if open_ else "no backend", "backends_open": open_},
            status=200 if open_ else 503,
        )

    async def _models(self, _request: web.Request) -> web.Response:
        data = [
            {"id": name, "object": "model", "created": 0, "owned_by": "scalesched"}
            for name in sorted(self.state.serving)
        ]
        return web.json_response({"object": "list", "data": data})

    async def _metrics(self, _request: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(self.metrics.registry),
            headers={"Content-Type": "text/plain; version=0.0.4"},
        )

    async def _complete(self, request: web.Request, path: str, chat: bool) -> web.StreamResponse:
        try:
            raw, body = await read_json(request)
            req = parse_request(body, chat)
            signals = task_signals(request.headers)
            if req.model not in self.state.serving:
                raise BadRequest(
                    f"the model {req.model!r} does not exist",
                    status=404,
                    param="model",
                    code="model_not_found",
                )
        except BadRequest as exc:
            self.metrics.refused.labels("bad_request").inc()
            return bad_request(request, exc)
        if self.in_flight >= self.max_pending:
            self.metrics.refused.labels("queue_full").inc()
            return refusal(
                request,
                "the gateway is at capacity; retry later",
                429,
                headers={"Retry-After": "1"},
            )
        self.in_flight += 1
        return await self._run(request, body, raw, path, req, signals)

    def quick(
        self, request: FrontRequest, raw: bytes, headers: dict[str, str], path: str, chat: bool
    ) -> Coroutine[Any, Any, web.StreamResponse] | None:
        """The fast path's call (:mod:`scalesched.serve.front`): a coroutine answering a
        well-formed non-streamed call to a known model, or None: aiohttp's path then
        serves it, where every refusal is made and logged."""
        try:  # UTF-8 (every client's) read directly; other encodings take aiohttp's path
            body = json.loads(raw.decode())
            req = parse_request(body, chat)
            signals = task_signals(headers)
        except (ValueError, RecursionError):  # a BadRequest is a ValueError too
            return None
        if req.stream or req.model not in self.state.serving or self.in_flight >= self.max_pending:
            return None
        self.in_flight += 1  # here, so that no other call passes the check before it runs
        upstream = "/chat/completions" if chat else "/completions"
        return self._run(cast(web.BaseRequest, request), body, raw, upstream, req, signals)

    async def _run(
        self,
        request: web.BaseRequest,
        body: dict[str, Any],
        raw: bytes,
        path: str,
        req: CompletionRequest,
        signals: TaskSignals,
    ) -> web.StreamResponse:
        """An admitted call (``in_flight`` counts it until this returns)."""
        try:
            workflow = (
                request.headers.get("x-workflow-id")
                or _user(body)
                or f"{self._anonymous}{next(self._calls)}"
            )
            session = request.headers.get("x-session-id") or workflow
            task = self.state.task(req, workflow, session, signals)
            return await self._attempts(request, body, raw, path, req, task, workflow)
        except Exception as exc:  # a bug: one log line and an OpenAI 500, not a traceback
            return failure(request, exc)
        finally:
            self.in_flight -= 1

    async def _attempts(
        self,
        request: web.BaseRequest,
        body: dict[str, Any],
        raw: bytes,
        path: str,
        req: CompletionRequest,
        task: TaskRequest,
        workflow: str,
    ) -> web.StreamResponse:
        tried: list[int] = []
        last = ""
        for attempt in range(self.max_attempts):
            try:
                server, est, priority = await self._place(req.model, task, tuple(tried))
            except NoBackend:
                break
            t0 = time.perf_counter()
            payload = self._payload(server, body, raw, priority)
            try:
                out = await self._forward(request, payload, path, req, server, t0)
            finally:
                self._ended(task, server, est)
            if isinstance(out, str):  # failed before anything reached the client
                name = self.backends[server].name
                self.metrics.requests.labels(name, "error").inc()
                self.metrics.retries.labels(name).inc()
                tried.append(server)
                last = out
                self._failed(server, out, f"attempt {attempt + 1} of {self.max_attempts}")
                continue
            response, outcome = out
            took = time.perf_counter() - t0
            if outcome is OK:
                if self._fails[server]:
                    self._fails[server], self._backoff[server] = 0, 0.0
                self._ok[server].inc()
                self._latency[server].observe(took)
            else:
                self.metrics.requests.labels(self.backends[server].name, outcome).inc()
            self.state.served(workflow, took)
            return response
        self.metrics.refused.labels("no_backend").inc()
        if tried:
            return refusal(
                request,
                f"no backend could answer for the model {req.model!r}: {last}",
                502,
                param="model",
                code="backend_failed",
            )
        return refusal(
            request,
            f"no backend for the model {req.model!r} is open now (each is down or backing "
            "off after failures); retry later",
            503,
            param="model",
            code="model_unavailable",
            headers={"Retry-After": str(self._retry_after(req.model))},
        )

    def _payload(
        self, server: int, body: dict[str, Any], raw: bytes, priority: float | None
    ) -> bytes:
        """The body sent to ``server``: the client's bytes as they came (no re-encoding)
        unless fields must be merged: the backend's ``extra`` under the client's fields,
        and, where priorities are forwarded and the policy gave one, its integer
        ``priority`` over the client's."""
        extra = self.backends[server].endpoint.extra
        wire = wire_priority(priority) if self._forward_priority[server] else None
        if wire is None:
            return json.dumps({**extra, **body}).encode() if extra else raw
        self._prioritized[server].inc()
        return json.dumps({**extra, **body, PRIORITY_FIELD: wire}).encode()

    async def _forward(
        self,
        request: web.BaseRequest,
        payload: bytes,
        path: str,
        req: CompletionRequest,
        server: int,
        t0: float,
    ) -> tuple[web.StreamResponse, str] | str:
        """One attempt on ``server``: the response sent to the client and its outcome
        (a ``requests_total`` label), or why it failed before anything was sent (the
        caller retries elsewhere)."""
        name = self.backends[server].name
        endpoint = self.backends[server].endpoint
        stream = req.stream
        try:
            upstream = await self._pools[server].call(
                "POST",
                self._paths[server][path],
                payload,
                endpoint.timeout_s,
                endpoint.idle_timeout_s if stream else None,
                stream,
            )
        except (UpstreamError, OSError) as exc:
            self._mask(server)
            what = "broke off its answer" if getattr(exc, "answered", False) else "unreachable"
            return f"{name} {self._broke(server, exc, what)}"
        try:
            status = upstream.status
            if status >= 500:
                return f"{name} answered {status}"
            if status != 200 or not stream:
                return await self._whole(upstream, server)
            kind = upstream.headers.get("content-type", "")
            if not kind.startswith("text/event-stream"):
                return f"{name} answered a streamed call with {kind or 'no content type'}, " + (
                    "not an event stream"
                )
            return await self._stream(request, upstream, server, t0)
        finally:
            upstream.release()

    def _broke(self, server: int, exc: BaseException, what: str) -> str:
        """Why a connection to ``server`` failed, in words (the timeouts named by their
        backends-file fields)."""
        endpoint = self.backends[server].endpoint
        if isinstance(exc, IdleTimeout):
            return f"sent nothing for {endpoint.idle_timeout_s:g} s (idle_timeout_s)"
        if isinstance(exc, Deadline):
            return f"did not finish within {endpoint.timeout_s:g} s (timeout_s)"
        return f"{what}: {describe(exc)}"

    async def _whole(
        self, upstream: Connection, server: int
    ) -> tuple[web.StreamResponse, str] | str:
        """The upstream's whole answer, checked to be JSON (a 4xx is the client's: passed
        on as it is, counted ``rejected``)."""
        name = self.backends[server].name
        try:
            raw = await upstream.read_all()
            json.loads(raw)
        except UpstreamError as exc:
            self._mask(server)
            return f"{name} {self._broke(server, exc, 'broke off its answer')}"
        except (ValueError, RecursionError):
            return f"{name} answered malformed JSON"
        status = upstream.status
        response = web.Response(body=raw, status=status, content_type="application/json")
        return response, OK if status == 200 else "rejected"

    async def _stream(
        self, request: web.BaseRequest, upstream: Connection, server: int, t0: float
    ) -> tuple[web.StreamResponse, str] | str:
        """Pass the upstream's events on as they arrive. If the upstream breaks before its
        first byte, or its first bytes are not server-sent events, the attempt failed
        (retried elsewhere); after it, the stream ends with an OpenAI-shaped error event,
        since the client has already been answered."""
        name = self.backends[server].name
        response = web.StreamResponse(headers=_EVENT_HEADERS)
        first = boundary = True
        while True:
            try:
                chunk = await upstream.read_chunk()
            except UpstreamError as exc:
                self._mask(server)
                why = self._broke(server, exc, "stream broke")
                if first:
                    return f"{name} {why} before its first byte"
                self._failed(server, f"{name} {why} mid-stream", "the client's stream ends")
                message = f"the backend {name} failed mid-response"
                event = error_body(message, "server_error", code="backend_failed")
                # Close a partly passed event first, so the error is an event of its own.
                cut = b"" if boundary else b"\n\n"
                with contextlib.suppress(ConnectionError, aiohttp.ClientError):
                    await response.write(cut + sse(event) + sse("[DONE]"))
                return response, "broken_stream"
            if not chunk:
                break
            try:
                if first:
                    if not _looks_like_events(chunk):
                        return f"{name} answered a streamed call with bytes that are not events"
                    await response.prepare(request)
                    self._ttft[server].observe(time.perf_counter() - t0)
                    first = False
                await response.write(chunk)
                boundary = chunk.endswith(b"\n\n")
            except (ConnectionError, aiohttp.ClientError):
                return response, "client_gone"  # stop reading the upstream
        with contextlib.suppress(ConnectionError, aiohttp.ClientError):
            if first:
                await response.prepare(request)
            await response.write_eof()
        return response, OK

    # -- which backends are open: their /metrics, failed calls, back-off ------------------
    def _failed(self, server: int, why: str, then: str) -> None:
        """A call failed on ``server`` (logged here, one line). After ``trip_after``
        failures in a row the backend is held out of every decision for a back-off
        (``backoff_s``, doubled per hold up to ``max_backoff_s``); after it, the next
        call is its trial: an answer resets the count, a failure holds it again."""
        self._fails[server] += 1
        held = ""
        if self._fails[server] >= self.trip_after and not self._held[server]:
            delay = min(self.max_backoff_s, 2 * self._backoff[server] or self.backoff_s)
            self._backoff[server], self._held[server] = delay, True
            loop = asyncio.get_running_loop()
            self._held_until[server] = loop.time() + delay
            self._timers[server] = loop.call_later(delay, self._unhold, server)
            self._refresh(server)
            held = f"; held out for {delay:g} s after {self._fails[server]} failures in a row"
        elif not self._up[server]:
            held = "; masked until its /metrics answers"
        log.warning("call failed: %s (%s)%s", why, then, held)  # ``why`` names the backend

    def _unhold(self, server: int) -> None:
        self._held[server], self._timers[server] = False, None
        self._refresh(server)

    def _mask(self, server: int) -> None:
        """``server`` is down (a refused or broken connection, a failed scrape) until its
        /metrics answers again."""
        self._up[server] = False
        self._refresh(server)

    def _refresh(self, server: int) -> None:
        open_ = self._up[server] and not self._held[server]
        if bool(self.state.healthy[server]) != open_:
            self.state.healthy[server] = open_
            self._healthy[server].set(1 if open_ else 0)
            if open_:
                log.warning("backend %s open again", self.backends[server].name)

    def _retry_after(self, served: str) -> int:
        """Seconds until a backend of ``served`` may open again: the earliest end of a
        hold, or the next scrape for one that is down (at least 1)."""
        now = asyncio.get_running_loop().time()
        waits = []
        for s in np.flatnonzero(self.state.serving[served]):
            wait = self._held_until[s] - now if self._held[s] else 0.0
            waits.append(wait if self._up[s] else max(wait, self.scrape_s))
        return max(1, math.ceil(min(waits, default=self.scrape_s)))

    async def _scrape_loop(self) -> None:
        while True:
            done = await asyncio.gather(
                *[self._scrape(s) for s in range(len(self.backends))], return_exceptions=True
            )
            for server, result in enumerate(done):  # a bug must not end every scrape
                if isinstance(result, Exception):
                    name = self.backends[server].name
                    log.error("scraping backend %s failed", name, exc_info=result)
            await asyncio.sleep(self.scrape_s)

    async def _scrape(self, server: int) -> None:
        """Read a backend's vLLM gauges: its load, and whether it is up (any answer
        below 500 is up; a refused connection, a timeout or a 5xx masks it)."""
        backend = self.backends[server]
        try:
            r = await self._pools[server].call("GET", self._metrics_paths[server], b"", 2.0)
            try:
                if r.status >= 500:
                    raise UpstreamError(f"status {r.status}")
                # An engine without /metrics (404) is up, it only reports no load; bytes
                # that are not UTF-8 are read as far as they go.
                text = r.body().decode("utf-8", "replace") if r.status == 200 else ""
            finally:
                r.release()
        except (UpstreamError, OSError) as exc:
            if self._up[server]:
                log.warning(
                    "backend %s masked: its /metrics failed: %s", backend.name, describe(exc)
                )
            self._mask(server)
            return
        self.state.observe(server, load_by_model(text, backend, self.state.catalog))
        self._up[server] = True
        self._refresh(server)


def _looks_like_events(chunk: bytes) -> bool:
    """Whether a stream's first bytes start a server-sent event (a field or a comment
    line), or could once more bytes arrive: a check of the first chunk only, so a
    backend answering a streamed call with HTML or a bare JSON body is a failed attempt,
    not a 200 full of garbage."""
    head = chunk.lstrip()[:6]
    return any(f.startswith(head) or head.startswith(f) for f in _SSE_FIELDS)


_EVENT_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_SSE_FIELDS = (b"data:", b":", b"event:", b"id:", b"retry:")


def load_by_model(text: str, backend: BackendEntry, catalog: dict[str, int]) -> dict[int, float]:
    """Running + waiting requests per catalog model index, from vLLM's Prometheus text.

    Only ``vllm:num_requests_running`` and ``_waiting`` are read, by a scan for their
    lines: a full parse
    (prometheus-client's) of every series an engine exports cost milliseconds per backend
    each scrape, CPU the gateway's requests then lacked."""
    out: dict[int, float] = {}
    for sample in _LOAD_SAMPLE.finditer(text):
        served = _model_name(sample.group("labels") or "")
        if served is None or served not in backend.models or served not in catalog:
            continue
        try:
            value = float(sample.group("value"))
        except ValueError:  # unparsable metrics: no load information this time
            return {}
        m = catalog[served]
        out[m] = out.get(m, 0.0) + value
    return out


def _model_name(labels: str) -> str | None:
    """The ``model_name`` label's value in a Prometheus label set (escapes undone)."""
    for match in _LABEL.finditer(labels):
        if match.group(1) == "model_name":
            return _ESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1), match.group(2))
    return None


FORWARD_ALL = "all"
"""``--forward-priority`` for every backend."""


def priority_backends(spec: str | None, backends: Sequence[BackendEntry]) -> list[str]:
    """The backend names ``serve --forward-priority`` names: ``all``, or comma-separated
    names of the backends file (an InputError naming the option for an unknown one)."""
    if spec is None:
        return []
    if spec.strip() == FORWARD_ALL:
        return [b.name for b in backends]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise InputError("--forward-priority", "forward-priority", "name a backend, or all")
    _forwarding(backends, names)  # refuses unknown names
    return names


def _forwarding(backends: Sequence[BackendEntry], names: Iterable[str]) -> list[bool]:
    """Per backend, whether it is among ``names`` (each of which must be a backend)."""
    chosen = set(names)
    known = {b.name for b in backends}
    unknown = sorted(chosen - known)
    if unknown:
        raise InputError(
            "--forward-priority",
            "forward-priority",
            f"unknown backend {unknown[0]!r}; the backends are {', '.join(sorted(known))}",
        )
    return [b.name in chosen for b in backends]


def _auth(backend: BackendEntry) -> dict[str, str]:
    env = backend.endpoint.api_key_env
    key = os.environ.get(env, "") if env else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def _user(body: dict[str, Any]) -> str | None:
    user = body.get("user")
    return user if isinstance(user, str) and user else None
