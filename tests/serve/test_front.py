"""The gateway's fast path: what it serves itself (well-formed non-streamed calls, kept
alive, pipelined), what it hands to aiohttp with the bytes it has (anything else, answered
as before), and idle connections closed.

Servers listen on 127.0.0.1 with ephemeral ports; every read has a deadline."""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import Prefer, backend

from scalesched.policies import get_policy
from scalesched.serve import front
from scalesched.serve.engine import EngineServer, server_of_type
from scalesched.serve.front import _may_take, _parse_head
from scalesched.serve.gateway import Gateway
from scalesched.serve.site import MAX_BODY_BYTES, start_site

CHAT = {"model": "llama", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8}


def _request(body: dict[str, object] | bytes, *headers: str, path: str = "/v1/chat/completions"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = [f"POST {path} HTTP/1.1", "Host: t", "Content-Type: application/json", *headers]
    head.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One answer: its status, headers (lower-case) and body (by length, or chunked)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v for k, _, v in (h.partition(": ") for h in lines[1:] if h)}
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    else:  # chunked
        body = b""
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    return int(lines[0].split()[1]), headers, body


LOOPS = ["asyncio"]
try:
    import uvloop

    LOOPS.append("uvloop")
except ImportError:  # pragma: no cover - the serve extra installs it where it builds
    uvloop = None


def _run(check, loop: str = "asyncio") -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        e = EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, 0.0)
        engine, port = await start_site(e.app(), "127.0.0.1", 0)
        gw = Gateway(
            [backend("b0", f"http://127.0.0.1:{port}/v1")],
            Prefer([0]),
            get_policy("least_loaded"),
            scrape_s=60,
        )
        served = []
        quick = gw.quick

        def counted(*args):  # type: ignore[no-untyped-def]
            answer = quick(*args)
            served.append(answer is not None)
            return answer

        gw.quick = counted  # type: ignore[method-assign]
        runner, gport = await start_site(gw.app(), "127.0.0.1", 0)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", gport)
            try:
                await check(reader, writer, served, gw)
            finally:
                writer.close()
        finally:
            await runner.cleanup()
            await engine.cleanup()

    if loop == "uvloop":  # what serve runs on: its transports must take set_protocol too
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    else:
        asyncio.run(main())


@pytest.mark.parametrize("loop", LOOPS)
def test_well_formed_calls_are_served_here_kept_alive_and_pipelined(loop):
    async def check(reader, writer, served, gw) -> None:  # type: ignore[no-untyped-def]
        writer.write(_request(CHAT))
        status, headers, body = await _answer(reader)
        assert status == 200 and headers["content-type"].startswith("application/json")
        assert json.loads(body)["object"] == "chat.completion"
        # Two calls in one write (pipelined), one a completion: answered in order.
        completion = {"model": "llama", "prompt": "hi", "max_tokens": 4}
        writer.write(_request(CHAT) + _request(completion, path="/v1/completions"))
        first, second = await _answer(reader), await _answer(reader)
        assert json.loads(first[2])["object"] == "chat.completion"
        assert json.loads(second[2])["object"] == "text_completion"
        assert served == [True, True, True] and gw.in_flight == 0
        metrics = gw.metrics.requests.labels("b0", "ok")._value.get()
        assert metrics == 3

    _run(check, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_anything_else_is_handed_to_aiohttp_with_its_bytes_and_answered_as_before(loop):
    async def check(reader, writer, served, gw) -> None:  # type: ignore[no-untyped-def]
        writer.write(_request(CHAT))
        assert (await _answer(reader))[0] == 200
        # A body the gateway refuses: the fast path declines, aiohttp answers the 400.
        writer.write(_request({"model": "llama", "messages": "no"}))
        status, _, body = await _answer(reader)
        assert status == 400 and json.loads(body)["error"]["param"] == "messages"
        assert served == [True, False]
        # The connection is aiohttp's now: a stream and a plain call are answered there.
        writer.write(_request({**CHAT, "stream": True}))
        status, headers, body = await _answer(reader)
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        assert body.rstrip().endswith(b"data: [DONE]")
        writer.write(_request(CHAT, "Connection: close"))
        assert (await _answer(reader))[0] == 200
        assert await asyncio.wait_for(reader.read(), 10) == b""  # closed as asked
        assert served == [True, False] and gw.in_flight == 0

    _run(check, loop)


def test_a_request_cut_across_writes_is_read_whole():
    async def check(reader, writer, served, _gw) -> None:  # type: ignore[no-untyped-def]
        data = _request(CHAT)
        for i in range(0, len(data), 7):
            writer.write(data[i : i + 7])
            await writer.drain()
            await asyncio.sleep(0.001)
        assert (await _answer(reader))[0] == 200 and served == [True]

    _run(check)


def test_an_idle_connection_is_closed(monkeypatch):
    monkeypatch.setattr(front, "KEEPALIVE_S", 0.2)

    async def check(reader, writer, served, _gw) -> None:  # type: ignore[no-untyped-def]
        writer.write(_request(CHAT))
        assert (await _answer(reader))[0] == 200
        assert await asyncio.wait_for(reader.read(), 5) == b""

    _run(check)


GOOD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 2"


@pytest.mark.parametrize(
    ("change", "taken"),
    [
        ((b"", b""), True),
        ((b"Host: t", b"Host: t\r\nConnection: keep-alive"), True),
        ((b"/v1/chat/completions", b"/v1/completions"), True),
        ((b"HTTP/1.1", b"HTTP/1.0"), False),
        ((b"POST", b"PUT"), False),
        ((b"completions ", b"completions?x=1 "), False),
        ((b"/v1/chat/completions", b"/v1/models"), False),
        ((b"Host: t", b"Host: t\r\nTransfer-Encoding: chunked"), False),
        ((b"Host: t", b"Host: t\r\nContent-Encoding: gzip"), False),
        ((b"Host: t", b"Host: t\r\nExpect: 100-continue"), False),
        ((b"Host: t", b"Host: t\r\nConnection: close"), False),
        ((b"Host: t", b"Host: t\r\nHost: u"), False),
        ((b"Host: t", b"Host : t"), False),
        ((b"Host: t", b"Ho st: t"), False),
        ((b"Host: t", b"Host: a\x01b"), False),
        ((b"Host: t", b"Host: \xe9"), False),
        ((b"Host: t", b"X-Big: " + b"a" * 9000), False),
        ((b"Length: 2", b"Length: -1"), False),
        ((b"Length: 2", b"Length: %d" % (MAX_BODY_BYTES + 1)), False),
        ((b"\r\nContent-Length: 2", b""), False),
    ],
)
def test_the_fast_path_takes_only_plain_requests(change, taken):
    head = GOOD.replace(*change)
    assert (_parse_head(head, MAX_BODY_BYTES) is not None) is taken


@pytest.mark.parametrize(
    ("start", "taken"),
    [
        (b"P", True),
        (b"POST /v1/chat/comp", True),
        (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Le", True),
        (b"GET /metrics HTTP/1.1\r\n", False),
        (b"POST /v1/models ", False),
        (b"\x16\x03\x01\x02\x00", False),  # a TLS handshake
        (b"GARBAGE", False),
        (b"\r\nPOST /v1/chat/completions", False),
    ],
)
def test_a_head_still_coming_stays_on_the_fast_path_only_while_it_may_be_one(start, taken):
    assert _may_take(bytearray(start)) is taken


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    "data",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40),  # a TLS handshake
        b"POST /v1/chat/completions HTTP/1.1\nHost: t\nContent-Length: 2\n\n{}",
    ],
)
def test_bytes_that_start_no_request_it_takes_get_aiohttps_400_at_once(loop, data):
    """Neither a TLS handshake nor lines ended by LF alone ever bring the blank line the
    fast path waited for: they were held until keep-alive's end."""

    async def check(reader, writer, served, _gw) -> None:  # type: ignore[no-untyped-def]
        writer.write(data)
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.split(b" ")[1] == b"400" and served == []

    _run(check, loop)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("calls", [1, 2])
def test_a_client_that_closes_its_side_gets_its_answers_then_the_end(loop, calls):
    """A client that half-closes after its requests (and reads to the end) was answered
    here but held open until keep-alive's end."""

    async def check(reader, writer, served, _gw) -> None:  # type: ignore[no-untyped-def]
        writer.write(_request(CHAT) * calls)
        writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer.count(b"HTTP/1.1 200 OK") == calls and served == [True] * calls

    _run(check, loop)
