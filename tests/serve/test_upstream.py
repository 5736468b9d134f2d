"""The gateway's upstream client against raw sockets: each way an HTTP/1.1 answer may be
framed, split anywhere; keep-alive reuse; a keep-alive race sent again once; and each
failure as its own error. On asyncio's loop and on uvloop (what ``serve`` runs on).

Servers listen on 127.0.0.1 with ephemeral ports; every call has a deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from scalesched.serve.upstream import Broken, Deadline, IdleTimeout, NotHTTP, Pool

LOOPS = ["asyncio"]
try:
    import uvloop

    LOOPS.append("uvloop")
except ImportError:  # pragma: no cover - the serve extra installs it where it builds
    uvloop = None

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]
"""Answers request number k on a connection; False closes the connection."""


async def _read_request(reader: asyncio.StreamReader) -> bytes | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return head + await reader.readexactly(length)


def _run(answer: Answer, check: Callable[[Pool, list[bytes]], Awaitable[None]], loop: str):
    """Serve ``answer`` on an ephemeral port; ``check`` gets a pool to it and the list of
    requests the server read (a connection's first request is marked ``NEW``)."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        k = 0
        while (request := await _read_request(reader)) is not None:
            seen.append((b"NEW " if k == 0 else b"") + request)
            if not await answer(reader, writer, k):
                break
            k += 1
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Pool(f"http://127.0.0.1:{port}/v1", {"Content-Type": "application/json"})
        try:
            await asyncio.wait_for(check(pool, seen), 10)
        finally:
            pool.close()
            server.close()

    if loop == "uvloop":
        assert uvloop is not None
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    else:
        asyncio.run(main())


def _writes(*parts: bytes, keep: bool = True) -> Answer:
    """An answer written in ``parts`` (a pause between each: separate segments)."""

    async def answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter, _k: int) -> bool:
        for part in parts:
            writer.write(part)
            await writer.drain()
            await asyncio.sleep(0.005)
        return keep

    return answer


def _bytewise(data: bytes) -> tuple[bytes, ...]:
    return tuple(data[i : i + 1] for i in range(len(data)))


OK = b'{"ok": true}'
LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n" + OK
CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5;ext=1\r\ndata:\r\n"
    b"7\r\n 1\n\ndat\r\n"
    b"6\r\na: 2\n\n\r\n"
    b"0\r\nX-Trailer: t\r\n\r\n"
)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("split", ["whole", "bytewise"])
def test_each_framing_is_read_whole_and_the_connection_kept(loop, split):
    to_eof = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"
    answers = [LENGTH, CHUNKED, b"HTTP/1.1 100 Continue\r\n\r\n" + LENGTH, to_eof, LENGTH]

    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, _k: int) -> bool:
        data = answers.pop(0)
        parts = _bytewise(data) if split == "bytewise" else (data,)
        return await _writes(*parts, keep=data is not to_eof)(r, w, _k)

    async def check(pool: Pool, seen: list[bytes]) -> None:
        bodies = []
        for _ in range(5):
            conn = await pool.call("POST", "/v1/chat/completions", b"{}", 5.0)
            assert conn.status == 200
            bodies.append(conn.body())
            conn.release()
        assert bodies == [OK, b"data: 1\n\ndata: 2\n\n", OK, b"until the end", OK]
        # One connection for the first four answers, a new one after the close.
        assert [s.startswith(b"NEW ") for s in seen] == [True, False, False, False, True]
        assert seen[0].startswith(b"NEW POST /v1/chat/completions HTTP/1.1\r\n")
        assert b"\r\nContent-Length: 2\r\n\r\n{}" in seen[0]

    _run(answer, check, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_stream_is_read_as_it_comes_and_ends_empty(loop):
    head, rest = CHUNKED.split(b"\r\n\r\n", 1)

    async def check(pool: Pool, _seen: list[bytes]) -> None:
        conn = await pool.call("POST", "/v1/chat/completions", b"{}", 5.0, 1.0, stream=True)
        assert conn.headers["content-type"] == "text/event-stream"
        got = []
        while chunk := await conn.read_chunk():
            got.append(chunk)
        conn.release()
        assert b"".join(got) == b"data: 1\n\ndata: 2\n\n" and len(got) > 1

    _run(_writes(head + b"\r\n\r\n", *_bytewise(rest)), check, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_keep_alive_race_is_sent_again_once_on_a_new_connection(loop):
    async def answer(r: asyncio.StreamReader, w: asyncio.StreamWriter, k: int) -> bool:
        if k == 1:  # the second request on a connection: closed unanswered
            return False
        return await _writes(LENGTH)(r, w, k)

    async def check(pool: Pool, seen: list[bytes]) -> None:
        for _ in range(2):
            conn = await pool.call("POST", "/v1/completions", b"{}", 5.0)
            assert conn.status == 200 and conn.body() == OK
            conn.release()
        assert [s.startswith(b"NEW ") for s in seen] == [True, False, True]

    _run(answer, check, loop)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize(
    "what",
    ["closed on a new connection", "cut mid-body", "not HTTP", "bad chunk size", "deadline"],
)
def test_each_failure_is_its_own_error(loop, what):
    answers: dict[str, tuple[Answer, type[Exception], bool]] = {
        "closed on a new connection": (_writes(keep=False), Broken, False),
        "cut mid-body": (_writes(LENGTH[:-4], keep=False), Broken, True),
        "not HTTP": (_writes(b"SSH-2.0-OpenSSH\r\n\r\n"), NotHTTP, False),
        "bad chunk size": (_writes(CHUNKED.replace(b"5;ext=1", b"zz")), NotHTTP, True),
        "deadline": (_writes(LENGTH[:20], b"", b"", b""), Deadline, False),
    }
    answer, error, answered = answers[what]

    async def check(pool: Pool, _seen: list[bytes]) -> None:
        with pytest.raises(error) as caught:
            await pool.call("POST", "/v1/completions", b"{}", 0.3)
        assert caught.value.answered is answered
        assert not pool._idle  # a failed connection is never pooled

    async def slow(r: asyncio.StreamReader, w: asyncio.StreamWriter, k: int) -> bool:
        await answer(r, w, k)
        await asyncio.sleep(1.0)  # past the call's 0.3 s deadline
        return False

    _run(slow if what == "deadline" else answer, check, loop)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_stream_that_stalls_fails_after_its_idle_timeout_not_its_deadline(loop):
    head, rest = CHUNKED.split(b"\r\n\r\n", 1)

    async def stall(r: asyncio.StreamReader, w: asyncio.StreamWriter, k: int) -> bool:
        await _writes(head + b"\r\n\r\n", rest[:14])(r, w, k)
        await asyncio.sleep(2.0)
        return False

    async def check(pool: Pool, _seen: list[bytes]) -> None:
        conn = await pool.call("POST", "/v1/completions", b"{}", 30.0, 0.3, stream=True)
        t0 = asyncio.get_running_loop().time()
        assert await conn.read_chunk() == b"data:"
        with pytest.raises(IdleTimeout):
            while await conn.read_chunk():
                pass
        assert 0.2 < asyncio.get_running_loop().time() - t0 < 1.5
        conn.release()

    _run(stall, check, loop)


def test_connecting_to_nothing_is_an_os_error():
    async def main() -> None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # bound, not listening: refused
            with pytest.raises(OSError):
                await Pool(f"http://127.0.0.1:{port}/v1", {}).call("GET", "/metrics", b"", 2.0)

    asyncio.run(main())


def test_uvicorn_answers_are_read_and_its_idle_close_is_no_failure():
    """vLLM serves through uvicorn (h11): a whole answer, a streamed one, and a call after
    uvicorn closed the idle keep-alive connection (its ``timeout_keep_alive``)."""
    uvicorn = pytest.importorskip("uvicorn")

    async def app(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] != "http":
            return
        await receive()
        if scope["path"] == "/stream":
            head = [(b"content-type", b"text/event-stream")]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            for part in (b"data: 1\n\n", b"data: 2\n\n"):
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        else:
            head = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": head})
            await send({"type": "http.response.body", "body": OK})

    async def main() -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, timeout_keep_alive=0.2)
        config.log_level = "warning"
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        pool = Pool(f"http://127.0.0.1:{port}/v1", {})
        try:
            conn = await pool.call("POST", "/v1/chat/completions", b"{}", 5.0)
            assert conn.status == 200 and conn.body() == OK
            conn.release()
            conn = await pool.call("POST", "/stream", b"{}", 5.0, 1.0, stream=True)
            got = b""
            while chunk := await conn.read_chunk():
                got += chunk
            conn.release()
            assert got == b"data: 1\n\ndata: 2\n\n"
            assert len(pool._idle) == 1
            await asyncio.sleep(0.6)  # uvicorn closes the idle connection: the pool drops it
            assert not pool._idle
            conn = await pool.call("POST", "/v1/chat/completions", b"{}", 5.0)
            assert conn.status == 200 and conn.body() == OK
            conn.release()
        finally:
            pool.close()
            server.should_exit = True
            await asyncio.wait_for(task, 10)

    asyncio.run(main())
