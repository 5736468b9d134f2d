"""Every fault class the gateway and the engine meet, one table row each: what the client
gets (status, an OpenAI error object naming the field), what ``/metrics`` counts, and what
the log says (one line per fault, never a traceback).

Servers listen on 127.0.0.1 with ephemeral ports; every request has a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import signal
import time
import zlib
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web
from conftest import Prefer, backend, free_port

from scalesched.cluster.endpoints import BackendEntry
from scalesched.policies import get_policy
from scalesched.serve.engine import EngineServer, server_of_type
from scalesched.serve.gateway import Gateway
from scalesched.serve.site import MAX_BODY_BYTES, start_site

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}
DEADLINE = aiohttp.ClientTimeout(total=20)


def _post(path: str, body: bytes, *headers: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: t", "Connection: close", *headers]
    if not any(h.lower().startswith("content-length") for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _keep_alive(path: str, body: bytes, *headers: str) -> bytes:
    """A request the gateway's fast path reads first (no ``Connection: close``)."""
    head = [f"POST {path} HTTP/1.1", "Host: t", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def _get(path: str, method: str = "GET") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode()


def _chat(**changes: object) -> bytes:
    return json.dumps({**CHAT, **changes}).encode()


@dataclass(frozen=True)
class Case:
    name: str
    request: bytes
    status: int
    param: str | None = None
    """The error object's ``param`` (OpenAI JSON expected); ``"text"``: aiohttp's parser
    answers in plain text, or closes the connection, as the issue's table allows."""
    half_close: bool = False


DEEP = b"[" * 200_000 + b"]" * 200_000
PARSER = "text"
CASES = [
    Case(
        "a content part whose text is a number",
        _post(
            "/v1/chat/completions",
            _chat(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
        ),
        400,
        "messages[0].content[0].text",
    ),
    Case("a 200k-deep JSON array", _post("/v1/chat/completions", DEEP), 400),
    Case("a body that is not JSON", _post("/v1/chat/completions", b"{nope"), 400),
    Case("a prompt that is a number", _post("/v1/completions", _chat(prompt=5)), 400, "prompt"),
    Case("an unknown model", _post("/v1/chat/completions", _chat(model="gpt-9")), 404, "model"),
    # Its log line was as long as the name (a megabyte); it is cut like every other.
    Case(
        "an unknown model of 900k characters",
        _post("/v1/chat/completions", _chat(model="m" * 900_000)),
        404,
        "model",
    ),
    Case("an unknown route", _get("/v2/chat"), 404),
    Case("a path traversal", _get("/v1/../../etc/passwd"), 404),
    Case("a path with an encoded line break", _get("/v1/%0Aevil"), 404),
    Case(
        "a gzip body that is not gzip",
        _post("/v1/chat/completions", b"abcd", "Content-Encoding: gzip"),
        400,
    ),
    Case("GET on a POST route", _get("/v1/chat/completions"), 405),
    Case("DELETE on a GET route", _get("/v1/models", "DELETE"), 405),
    Case(
        "a body over 1 MiB",
        _post("/v1/chat/completions", b" " * (MAX_BODY_BYTES + 1)),
        413,
    ),
    Case("a header line over 8 KiB", _post("/v1/models", b"", "X-Big: " + "a" * 9000), 400, PARSER),
    Case(
        "a control character in x-workflow-id",
        _post("/v1/chat/completions", _chat(), "x-workflow-id: a\x01b"),
        400,
        PARSER,
    ),
    Case(
        "Content-Length -1",
        _post("/v1/chat/completions", b"{}", "Content-Length: -1"),
        400,
        PARSER,
    ),
    Case(
        "a body cut short",
        _post("/v1/chat/completions", b'{"model": "ll', "Content-Length: 100"),
        400,
        PARSER,
        half_close=True,
    ),
    # The fast path hands the cut body and the end of the connection to aiohttp at once:
    # its handler then began reading a closed connection (a RuntimeError, logged as one).
    Case(
        "a body cut short on a keep-alive connection",
        _keep_alive("/v1/chat/completions", b'{"model": "ll', "Content-Length: 100"),
        400,
        PARSER,
        half_close=True,
    ),
    # aiohttp's parser found these at the message's end and answered in plain text.
    Case(
        "a deflate body that does not end",
        _post("/v1/chat/completions", zlib.compress(_chat())[:-6], "Content-Encoding: deflate"),
        400,
    ),
    Case(
        "a body in a coding the servers do not read",
        _post("/v1/chat/completions", b"abcd", "Content-Encoding: br"),
        400,
    ),
    Case(
        "a gzip body over 1 MiB once decoded",
        _post(
            "/v1/chat/completions",
            gzip.compress(b" " * (2 * MAX_BODY_BYTES)),
            "Content-Encoding: gzip",
        ),
        413,
    ),
    # aiohttp logs these at debug level only (a request that is not HTTP at all).
    Case("a garbage request line", b"GARBAGE\r\n\r\n", 400, PARSER),
    Case("a TLS handshake", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" + bytes(40), 400, PARSER),
]


async def _raw(
    port: int, data: bytes, half_close: bool
) -> tuple[int | None, dict[str, str], bytes]:
    """Send raw bytes; the status (None: the connection closed unanswered), the headers
    and the body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        if half_close:
            writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), timeout=10)
    except ConnectionResetError:
        answer = b""
    finally:
        writer.close()
    if not answer:
        return None, {}, b""
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The captured log as an operator reads it: each record formatted (a traceback would
    be appended by the formatter), warnings and worse."""
    formatter = logging.Formatter("%(name)s %(message)s")
    return [formatter.format(r) for r in caplog.records if r.levelno >= logging.WARNING]


async def _engine(time_scale: float = 0.0) -> tuple[web.AppRunner, str]:
    e = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, time_scale)
    runner, port = await start_site(e.app(), "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{port}/v1"


async def _target_site(target: str) -> tuple[list, int]:
    """An engine, and with ``target`` "gateway" a gateway in front of it: the runners to
    clean up (outermost first) and the port the test talks to."""
    engine, url = await _engine()
    runners = [engine]
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    if target == "gateway":
        gw = Gateway([backend("b0", url)], get_policy("eft"), get_policy("least_loaded"))
        runner, port = await start_site(gw.app(), "127.0.0.1", 0)
        runners.insert(0, runner)
    return runners, port


@pytest.mark.parametrize("target", ["gateway", "engine"])
def test_each_bad_request_gets_its_status_and_one_log_line(target, caplog):
    caplog.set_level(logging.WARNING)

    async def main() -> list[str]:
        runners, port = await _target_site(target)
        problems = []
        try:
            for case in CASES:
                caplog.clear()
                status, headers, body = await _raw(port, case.request, case.half_close)
                await asyncio.sleep(0.05)  # a log line written after the answer
                lines = _lines(caplog)
                got = f"{case.name}: {status} {body[:120]!r} {lines}"
                if case.param == PARSER:
                    if status not in (case.status, None):
                        problems.append(got)
                else:
                    is_json = headers.get("content-type", "").startswith("application/json")
                    error = json.loads(body).get("error", {}) if is_json else {}
                    if status != case.status or not error or error.get("param") != case.param:
                        problems.append(got)
                    if case.status == 405 and "allow" not in headers:
                        problems.append(got)
                if len(lines) != 1 or "\n" in lines[0] or "Traceback" in lines[0]:
                    problems.append(f"{case.name}: log {lines}")
                elif len(lines[0]) > 1000:
                    problems.append(f"{case.name}: a log line of {len(lines[0])} characters")
            # Still serving after all of them.
            async with aiohttp.ClientSession(timeout=DEADLINE) as s:
                base = f"http://127.0.0.1:{port}"
                async with s.post(base + "/v1/chat/completions", json=CHAT) as r:
                    assert r.status == 200
        finally:
            for r in runners:
                await r.cleanup()
        return problems

    assert asyncio.run(main()) == []


@pytest.mark.parametrize("target", ["gateway", "engine"])
@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # without zlib's header, as sent too
        ("identity", lambda b: b),
    ],
)
def test_a_body_in_gzip_or_deflate_is_read(target, coding, encode):
    """The servers decode bodies themselves (not aiohttp's parser): each coding still reads."""

    async def main() -> int:
        runners, port = await _target_site(target)
        try:
            request = _post("/v1/chat/completions", encode(_chat()), f"Content-Encoding: {coding}")
            status, _, body = await _raw(port, request, False)
            assert b"choices" in body, body[:200]
            return status or 0
        finally:
            for r in runners:
                await r.cleanup()

    assert asyncio.run(main()) == 200


# -- upstream faults ------------------------------------------------------------------------


RELEASE = web.AppKey("release", asyncio.Event)
"""Set when a test ends: a fake backend's stalled handlers return (the runner's cleanup
would wait for them otherwise)."""


async def _stall(request: web.Request, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(request.app[RELEASE].wait(), seconds)


async def _fake(chat, metrics_status: int = 200) -> tuple[web.AppRunner, str]:
    """A backend answering chat calls with ``chat`` and /metrics with an empty body."""

    async def metrics(_r: web.Request) -> web.Response:
        return web.Response(text="", status=metrics_status)

    app = web.Application()
    app[RELEASE] = asyncio.Event()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/metrics", metrics)
    runner, port = await start_site(app, "127.0.0.1", 0)
    return runner, f"http://127.0.0.1:{port}/v1"


async def _five(_r: web.Request) -> web.Response:
    return web.json_response({"error": "boom"}, status=500)


async def _not_json(_r: web.Request) -> web.Response:
    return web.Response(text="{not json", content_type="application/json")


async def _plain_to_a_stream(_r: web.Request) -> web.Response:
    return web.Response(text="hello, I am not a stream")  # 200 text/plain


async def _garbage_events(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b"{not an event}\n\n")
    await response.write_eof()
    return response


async def _slow(request: web.Request) -> web.Response:
    await _stall(request, 5)
    return web.json_response({})


async def _breaks_mid_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b'data: {"choices": []}\n\n')
    await asyncio.sleep(0.05)
    assert request.transport is not None
    request.transport.abort()  # the connection dies, the chunked body unfinished
    return response


async def _stalls_mid_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b'data: {"choices": []}\n\n')
    await _stall(request, 30)  # as a SIGSTOPped engine: the connection open, nothing sent
    return response


async def _stalls_before_a_byte(request: web.Request) -> web.StreamResponse:
    await _stall(request, 30)
    return web.Response()


@dataclass(frozen=True)
class Upstream:
    name: str
    handler: object
    stream: bool
    status: int
    """What the client gets when this backend is the only one."""
    outcome: str
    """The ``requests_total`` outcome counted for the backend."""
    says: str
    """Words of the 502's message, or of the log line."""


UPSTREAM = [
    Upstream("a 5xx", _five, False, 502, "error", "answered 500"),
    Upstream("a body that is not JSON", _not_json, False, 502, "error", "malformed JSON"),
    Upstream("plain text to a stream", _plain_to_a_stream, True, 502, "error", "text/plain"),
    Upstream("garbage events", _garbage_events, True, 502, "error", "not events"),
    Upstream("the total deadline", _slow, False, 502, "error", "within 0.5 s (timeout_s)"),
    Upstream("a stall before a byte", _stalls_before_a_byte, True, 502, "error", "idle_timeout_s"),
    Upstream("a stream broken", _breaks_mid_stream, True, 200, "broken_stream", "mid-stream"),
    Upstream("a stream stalled", _stalls_mid_stream, True, 200, "broken_stream", "idle_timeout_s"),
]


def _fast(name: str, url: str) -> BackendEntry:
    """A backend with a 0.5 s deadline and a 0.3 s idle timeout."""
    entry = backend(name, url)
    endpoint = entry.endpoint.model_copy(update={"timeout_s": 0.5, "idle_timeout_s": 0.3})
    return entry.model_copy(update={"endpoint": endpoint})


def _metric(metrics: str, series: str) -> float:
    for line in metrics.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("case", UPSTREAM, ids=[u.name for u in UPSTREAM])
def test_an_upstream_fault_is_retried_before_the_first_byte_and_never_counted_ok(case, caplog):
    caplog.set_level(logging.WARNING)

    async def main() -> None:
        bad_runner, bad_url = await _fake(case.handler)
        good_runner, good_url = await _engine()
        alone = Gateway(
            [_fast("bad", bad_url)], Prefer([0]), get_policy("least_loaded"), scrape_s=60
        )
        paired = Gateway(
            [_fast("bad", bad_url), backend("good", good_url)],
            Prefer([0, 1]),
            get_policy("least_loaded"),
            scrape_s=60,
        )
        runners = [bad_runner, good_runner]
        urls = []
        for gw in (alone, paired):
            runner, port = await start_site(gw.app(), "127.0.0.1", 0)
            runners.insert(0, runner)
            urls.append(f"http://127.0.0.1:{port}")
        body = {**CHAT, "stream": case.stream}
        try:
            async with aiohttp.ClientSession(timeout=DEADLINE) as s:
                t0 = time.monotonic()
                async with s.post(urls[0] + "/v1/chat/completions", json=body) as r:
                    assert r.status == case.status
                    raw = await r.read()
                assert time.monotonic() - t0 < 5  # the timeouts ended it, not the test's
                if case.status == 502:
                    error = json.loads(raw)["error"]
                    assert error["code"] == "backend_failed" and error["param"] == "model"
                    assert case.says in error["message"] and "'llama'" in error["message"]
                else:  # passed on, then ended with an error event
                    events = [e for e in raw.decode().split("\n\n") if e.startswith("data: ")]
                    assert events[-1] == "data: [DONE]"
                    assert json.loads(events[-2][6:])["error"]["code"] == "backend_failed"
                async with s.get(urls[0] + "/metrics") as r:
                    metrics = await r.text()
                requests = 'scalesched_gateway_requests_total{backend="bad",outcome="%s"}'
                assert _metric(metrics, requests % case.outcome) == 1
                assert _metric(metrics, requests % "ok") == 0
                lines = [line for line in _lines(caplog) if "call failed: bad " in line]
                assert any(case.says in line for line in lines), lines
                if case.status == 502:  # with a good backend too, the call is retried there
                    async with s.post(urls[1] + "/v1/chat/completions", json=body) as r:
                        assert r.status == 200
                        assert b"backend_failed" not in await r.read()
        finally:
            bad_runner.app[RELEASE].set()
            for r in runners:
                await r.cleanup()
        text = _lines(caplog)
        assert all("\n" not in line and "Traceback" not in line for line in text), text

    asyncio.run(main())


def test_a_failing_backend_is_held_out_with_a_doubling_back_off():
    state = {"five": True}

    async def flaky(_r: web.Request) -> web.Response:
        if state["five"]:
            return web.json_response({"error": "boom"}, status=500)
        return web.json_response({"choices": [], "usage": {}})

    async def main() -> None:
        bad_runner, bad_url = await _fake(flaky)
        good_runner, good_url = await _engine()
        gw = Gateway(
            [backend("flaky", bad_url), backend("good", good_url)],
            Prefer([0, 1]),
            get_policy("least_loaded"),
            scrape_s=60,
            backoff_s=1.0,
        )
        runner, port = await start_site(gw.app(), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        retries = 'scalesched_gateway_retries_total{backend="flaky"}'
        try:
            async with aiohttp.ClientSession(timeout=DEADLINE) as s:

                async def call() -> float:
                    async with s.post(url, json=CHAT) as r:
                        assert r.status == 200
                    async with s.get(f"http://127.0.0.1:{port}/metrics") as r:
                        return _metric(await r.text(), retries)

                async def held_for() -> float:
                    """Seconds until the hold on flaky ends (bounded wait)."""
                    t0 = time.monotonic()
                    while not gw.state.healthy[0] and time.monotonic() - t0 < 10:
                        await asyncio.sleep(0.02)
                    assert gw.state.healthy[0]
                    return time.monotonic() - t0

                # Three failures in a row pay a failed attempt each, then it is held out.
                assert [await call() for _ in range(3)] == [1, 2, 3]
                tripped = time.monotonic()
                assert not gw.state.healthy[0] and gw._backoff[0] == 1.0
                assert [await call() for _ in range(2)] == [3, 3]  # no attempt paid there
                await held_for()  # the hold ends: the next call is a trial
                assert 0.3 < time.monotonic() - tripped < 1.5
                assert await call() == 4  # failed: held again, twice as long
                assert not gw.state.healthy[0] and gw._backoff[0] == 2.0
                state["five"] = False
                assert 1.3 < await held_for() < 2.5
                assert await call() == 4  # answered: the count and the back-off reset
                assert gw._fails[0] == 0 and gw._backoff[0] == 0
        finally:
            await runner.cleanup()
            await bad_runner.cleanup()
            await good_runner.cleanup()

    asyncio.run(main())


def test_a_model_whose_backends_are_all_closed_gets_503_with_retry_after(caplog):
    caplog.set_level(logging.WARNING)

    async def main() -> None:
        bad_runner, bad_url = await _fake(_five)
        down = backend("down", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens
        gw = Gateway(
            [backend("five", bad_url), down],
            Prefer([0, 1]),
            get_policy("least_loaded"),
            scrape_s=60,
            trip_after=1,
            backoff_s=30,
        )
        runner, port = await start_site(gw.app(), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        try:
            async with aiohttp.ClientSession(timeout=DEADLINE) as s:
                async with s.post(url, json=CHAT) as r:
                    assert r.status == 502  # five answered 500, down refused: both closed
                caplog.clear()
                async with s.post(url, json=CHAT) as r:
                    assert r.status == 503
                    # The earliest reopening: down's next scrape (60 s), five's hold (30 s).
                    assert 29 <= int(r.headers["Retry-After"]) <= 30
                    error = (await r.json())["error"]
                assert error["param"] == "model" and "'llama'" in error["message"]
                async with s.get(f"http://127.0.0.1:{port}/health") as r:
                    assert r.status == 503
        finally:
            await runner.cleanup()
            await bad_runner.cleanup()
        lines = _lines(caplog)
        assert len(lines) == 1 and "503" in lines[0], lines

    asyncio.run(main())


def test_a_sigstopped_engine_ends_its_stream_after_the_idle_timeout(engine_process):
    port = free_port()
    proc = engine_process(port, 0.5)  # slow: a stream lasts seconds

    async def main() -> None:
        good_runner, good_url = await _engine()
        stalled = backend("stalled", f"http://127.0.0.1:{port}/v1")
        endpoint = stalled.endpoint.model_copy(update={"idle_timeout_s": 1.0})
        gw = Gateway(
            [stalled.model_copy(update={"endpoint": endpoint}), backend("good", good_url)],
            Prefer([0, 1]),
            get_policy("least_loaded"),
            scrape_s=60,
        )
        runner, gport = await start_site(gw.app(), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{gport}/v1/chat/completions"
        assert proc.proc is not None
        try:
            async with aiohttp.ClientSession(timeout=DEADLINE) as s:
                body = {**CHAT, "stream": True, "max_tokens": 5000}
                async with s.post(url, json=body) as r:
                    assert (await r.content.readline()).startswith(b"data: ")
                    proc.proc.send_signal(signal.SIGSTOP)
                    t0 = time.monotonic()
                    rest = await asyncio.wait_for(r.read(), timeout=15)
                    took = time.monotonic() - t0
                assert b'"backend_failed"' in rest and rest.endswith(b"data: [DONE]\n\n")
                assert took < 4, took  # the idle timeout (1 s), not timeout_s (20 s)
                assert not gw.state.healthy[0]
                async with s.post(url, json=body) as r:  # masked: straight to the good one
                    assert r.status == 200 and b"backend_failed" not in await r.read()
        finally:
            proc.proc.send_signal(signal.SIGCONT)
            await runner.cleanup()
            await good_runner.cleanup()

    asyncio.run(main())


def test_a_backend_whose_metrics_are_not_text_stays_up_and_scraped():
    async def chat(_r: web.Request) -> web.Response:
        return web.json_response({})

    async def main() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)

        async def binary(_r: web.Request) -> web.Response:
            return web.Response(body=b"\xff\xfe\x00vllm:num_requests_running 3\n")

        app.router.add_get("/metrics", binary)
        runner, port = await start_site(app, "127.0.0.1", 0)
        gw = Gateway(
            [backend("b0", f"http://127.0.0.1:{port}/v1")],
            Prefer([0]),
            get_policy("least_loaded"),
            scrape_s=0.05,
        )
        grunner, _ = await start_site(gw.app(), "127.0.0.1", 0)
        try:
            gw.state.healthy[0] = gw._up[0] = False
            await asyncio.sleep(0.3)  # several scrapes: the loop is alive and reopens it
            assert gw.state.healthy[0] and gw._scraper is not None and not gw._scraper.done()
        finally:
            await grunner.cleanup()
            await runner.cleanup()

    asyncio.run(main())
