"""``scalesched loadgen``: drive the project's workflows against any OpenAI-compatible URL,
as real agents would.

Each workflow starts at its arrival time (model seconds x ``time_scale`` of wall time) and
runs its DAG: a task starts only when all its parents have finished; an LLM call is one
real streaming HTTP request (``x-workflow-id`` / ``x-session-id`` headers, ``max_tokens``
= the task's true output length, a prompt of its prompt length under the shared
4-characters-a-token rule, its application prompt as the system message), a tool call is a
timed wait (its CPU work on a speed-1 core plus its external latency). A failed call fails
its workflow (its dependants are skipped, the workflow is not counted as completed). Every
request has a deadline, so a run always ends by itself.

Times are reported in model seconds (wall seconds / ``time_scale``), so they compare with
``scalesched simulate`` on the same jobs.

Before any workflow starts, :func:`probe_url` asks the URL for its model list (``GET
/models``, which every OpenAI-compatible server answers): a wrong URL then fails in about a
second with one line saying why (no server there, not HTTP, a base URL without ``/v1``),
instead of after the whole arrival span with every workflow failed and no reason given.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import numpy as np

from scalesched.errors import InputError, short_repr
from scalesched.kernel.metrics import whole_run_window
from scalesched.serve.loop import run as run_loop
from scalesched.serve.protocol import (
    HINT_HEADER,
    OUTPUT_EST_HEADER,
    PATTERN_HEADER,
    ROLE_HEADER,
    prompt_of_tokens,
)
from scalesched.workload.instance import Job, TaskInstance, WorkflowInstance


@dataclass
class LoadResult:
    """What a load run measured (seconds are model seconds)."""

    time_scale: float
    response_times: list[float] = field(default_factory=list)
    outcomes: list[tuple[float, float]] = field(default_factory=list)
    """(arrival, response time; NaN for a workflow that failed) of every workflow, for the
    steady-state verdict."""
    ttfts: list[float] = field(default_factory=list)
    requests: int = 0
    requests_failed: int = 0
    workflows_failed: int = 0
    first_arrival: float = math.inf
    last_end: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """Keys as ``simulate --json`` names them where they apply, plus the request side."""
        rt = np.asarray(self.response_times)
        ttft = np.asarray(self.ttfts)
        span = self.last_end - self.first_arrival
        return {
            "workflows_completed": len(self.response_times),
            "workflows_failed": self.workflows_failed,
            "avg_response_time_s": float(rt.mean()) if rt.size else math.nan,
            "p50_response_time_s": float(np.percentile(rt, 50)) if rt.size else math.nan,
            "p99_response_time_s": float(np.percentile(rt, 99)) if rt.size else math.nan,
            "throughput_wps": len(rt) / span if rt.size and span > 0 else 0.0,
            "requests": self.requests,
            "requests_failed": self.requests_failed,
            "avg_ttft_s": float(ttft.mean()) if ttft.size else math.nan,
            "p99_ttft_s": float(np.percentile(ttft, 99)) if ttft.size else math.nan,
            **self._window(),
            "time_scale": self.time_scale,
            "errors": dict(self.errors),
        }

    def _window(self) -> dict[str, Any]:
        """Offered rate, mean in system and the steady-state verdict, as ``simulate``'s."""
        arrivals = [a for a, _ in self.outcomes]
        return whole_run_window(arrivals, [r for _, r in self.outcomes])


PROBE_TIMEOUT_S = 1.5
"""How long the probe waits for the URL's answer: a server that cannot list its models
in 1.5 s before any load is not one to measure, and a wrong URL must fail within 2 s."""


def check_url(url: str) -> str:
    """``url`` checked as an HTTP base URL (scheme, host, port in 1..65535), returned
    without a trailing slash; anything else is one line naming ``--url``."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InputError("--url", "url", f"malformed URL {short_repr(url)}: {exc}") from None
    if parts.scheme not in ("http", "https"):
        got = f"{parts.scheme}://" if parts.scheme and "//" in url else short_repr(url)
        raise InputError(
            "--url",
            "url",
            f"must be an http:// or https:// URL (e.g. http://127.0.0.1:8080/v1), got {got}",
        )
    if not parts.hostname:
        raise InputError("--url", "url", f"names no host: {short_repr(url)}")
    if port == 0:
        raise InputError("--url", "url", "port 0 is not a port a server listens on")
    return url.rstrip("/")


def probe_url(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, in one line naming ``--url``, unless ``url`` answers ``GET /models`` with
    a JSON object as an OpenAI-compatible server does. A 404 there from a URL not ending in
    ``/v1`` whose ``/v1/models`` answers says "did you mean .../v1?"."""
    url = check_url(url)
    why = run_loop(_probe(url, timeout_s))
    if why is not None:
        raise InputError("--url", "url", why)


async def _probe(url: str, timeout_s: float) -> str | None:
    """Why ``url`` is not an OpenAI-compatible base URL, or None."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        answer = await _get_models(session, url)
        if isinstance(answer, str):
            return f"cannot reach {url}: {answer}"
        status, is_json = answer
        if status == 200:
            return (
                None
                if is_json
                else f"{url}/models answers 200 but not JSON: not an OpenAI-compatible API"
            )
        if status == 404 and url.endswith("/v1"):
            return f"{url}/models answers 404: not an OpenAI-compatible base URL"
        if status == 404:
            if await _get_models(session, url + "/v1") == (200, True):
                return f"{url}/models answers 404; did you mean {url}/v1?"
            return f"{url}/models answers 404: not an OpenAI base URL (those end in /v1)"
        return f"{url}/models answers HTTP {status}: not an OpenAI-compatible API ready for load"


async def _get_models(session: aiohttp.ClientSession, url: str) -> tuple[int, bool] | str:
    """(status, whether the body is a JSON object) of ``GET url/models``, or why no HTTP
    answer came."""
    try:
        async with session.get(url + "/models", allow_redirects=False) as r:
            body = await r.read()
    except TimeoutError:
        return "no answer within the probe's time limit"
    except (aiohttp.ClientError, OSError) as exc:
        return _reason(exc)
    try:
        return r.status, isinstance(json.loads(body), dict)
    except ValueError:
        return r.status, False


def _reason(exc: BaseException) -> str:
    """A connection failure in a few words (aiohttp's messages repeat the address)."""
    cause = getattr(exc, "os_error", None) or exc.__cause__ or exc
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused (is the server running, on this port?)"
    text = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
    return " ".join(str(text).split())[:160]


def _session_roots(wf: WorkflowInstance) -> list[int]:
    """Per task, the first call of the context chain it extends (its session)."""
    roots = list(range(len(wf.tasks)))
    for i, task in enumerate(wf.tasks):
        if task.context_of is not None:
            roots[i] = roots[task.context_of]
    return roots


def chat_body(task: TaskInstance) -> dict[str, Any]:
    """The chat request of an LLM task: its application prompt as the system message (what
    a prefix-matching router keys on), the rest of its prompt as the user message."""
    prefix = min(task.prefix_tokens, task.prompt_tokens) if task.prefix_id else 0
    messages = []
    if prefix:
        messages.append(
            {"role": "system", "content": f"[{task.prefix_id}] " + prompt_of_tokens(prefix)}
        )
    messages.append(
        {"role": "user", "content": prompt_of_tokens(max(1, task.prompt_tokens - prefix))}
    )
    return {
        "model": task.model,
        "messages": messages,
        "max_tokens": max(1, task.output_tokens),
        "stream": True,
    }


def signal_headers(task: TaskInstance, pattern: str) -> dict[str, str]:
    """The ``x-task-*`` headers of an LLM task: what the simulator's scheduler sees of it
    (role, pattern, output estimate, difficulty hint), never its true output length."""
    headers = {
        OUTPUT_EST_HEADER: str(max(1, task.output_tokens_est)),
        HINT_HEADER: repr(float(task.difficulty_hint)),
        PATTERN_HEADER: pattern,
    }
    if task.role:
        headers[ROLE_HEADER] = task.role
    return headers


class LoadGenerator:
    """One run of ``jobs`` against ``url`` (the base up to /v1)."""

    def __init__(
        self,
        url: str,
        jobs: Sequence[Job],
        *,
        time_scale: float = 1.0,
        timeout_s: float = 600.0,
        on_workflow_done: Callable[[], None] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.jobs = list(jobs)
        self.time_scale = time_scale
        self.timeout_s = timeout_s
        self.on_workflow_done = on_workflow_done
        self.result = LoadResult(time_scale)
        self._t0 = 0.0

    def run(self) -> LoadResult:
        run_loop(self.run_async())
        return self.result

    async def run_async(self) -> LoadResult:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            self._t0 = time.perf_counter()
            await asyncio.gather(*[self._workflow(session, job) for job in self.jobs])
        return self.result

    def _now(self) -> float:
        """Model seconds since the start."""
        return (time.perf_counter() - self._t0) / self.time_scale

    async def _workflow(self, session: aiohttp.ClientSession, job: Job) -> None:
        await asyncio.sleep(max(0.0, job.arrival - self._now()) * self.time_scale)
        start = self._now()
        self.result.first_arrival = min(self.result.first_arrival, start)
        wf = job.workflow
        done = [asyncio.Event() for _ in wf.tasks]
        ok = [False] * len(wf.tasks)
        roots = _session_roots(wf)

        async def run_task(i: int) -> None:
            for p in wf.parents[i]:
                await done[p].wait()
            try:
                if all(ok[p] for p in wf.parents[i]):
                    ok[i] = await self._task(session, job, i, roots[i])
            finally:
                done[i].set()

        await asyncio.gather(*[run_task(i) for i in range(len(wf.tasks))])
        end = self._now()
        self.result.last_end = max(self.result.last_end, end)
        if all(ok):
            self.result.response_times.append(end - job.arrival)
            self.result.outcomes.append((job.arrival, end - job.arrival))
        else:
            self.result.workflows_failed += 1
            self.result.outcomes.append((job.arrival, math.nan))
        if self.on_workflow_done is not None:
            self.on_workflow_done()

    async def _task(self, session: aiohttp.ClientSession, job: Job, i: int, root: int) -> bool:
        task = job.workflow.tasks[i]
        if task.kind != "llm":
            await asyncio.sleep((task.cpu_work + task.ext_latency) * self.time_scale)
            return True
        headers = {
            "x-workflow-id": f"wf-{job.workflow_id}",
            "x-session-id": f"wf-{job.workflow_id}/{root}",
            **signal_headers(task, job.workflow.pattern),
        }
        self.result.requests += 1
        sent = time.perf_counter()
        try:
            ok = await self._call(session, chat_body(task), headers, sent)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            ok = self._fail(type(exc).__name__)
        return ok

    async def _call(
        self,
        session: aiohttp.ClientSession,
        body: dict[str, Any],
        headers: dict[str, str],
        sent: float,
    ) -> bool:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with session.post(
            self.url + "/chat/completions", json=body, headers=headers, timeout=timeout
        ) as r:
            if r.status != 200:
                await r.read()
                return self._fail(f"http {r.status}")
            first = True
            async for line in r.content:
                if not line.startswith(b"data: "):
                    continue
                data = line[6:].strip()
                if first:
                    self.result.ttfts.append((time.perf_counter() - sent) / self.time_scale)
                    first = False
                if data == b"[DONE]":
                    return True
                if b'"error"' in data and "error" in json.loads(data):
                    return self._fail("stream error")
            return self._fail("stream ended without [DONE]")

    def _fail(self, why: str) -> bool:
        self.result.requests_failed += 1
        self.result.errors[why] = self.result.errors.get(why, 0) + 1
        return False
