"""The gateway's fast path for the common call: a plain, well-formed, non-streamed completion
request is read and answered here, without aiohttp's request and response machinery;
anything else (a stream, an error of any kind, an unusual header, another route) is handed
to aiohttp, bytes and all, which serves the connection from then on.

Why hand-written: after the gateway's upstream client (:mod:`scalesched.serve.upstream`),
aiohttp's server was the largest part of a call's CPU left in Python
(``benchmarks/bench_gateway_steps.py``: about 30 us a call warm, with its request,
response, payload stream and a task per request). A well-formed call needs a small part
of it: one request line, a few headers, a body of known length, an answer of known length.
Under ``benchmarks/bench_serve.py``'s load the gateway's CPU per call fell from 0.57 ms to
0.45 with it (one run beside the gateway without it; docs/history/serve.md).

What the fast path takes: HTTP/1.1, ``POST /v1/chat/completions`` or ``/v1/completions``
with no query, a ``Content-Length`` body within :data:`~scalesched.serve.site.MAX_BODY_BYTES`,
header lines of printable ASCII under 8 KiB, no ``Transfer-Encoding``,
``Content-Encoding``, ``Expect``, ``Upgrade`` or ``Connection`` other than keep-alive, and
a body the gateway accepts as a non-streamed call (:meth:`Gateway.quick
<scalesched.serve.gateway.Gateway.quick>`). Every refusal, log line and error object is
then aiohttp's path, unchanged: the fast path only serves what needs none of them. A
connection handed over stays with aiohttp (a client that streams once keeps aiohttp for
that connection). Idle connections are closed after :data:`KEEPALIVE_S`, as aiohttp
closes its own.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Coroutine
from email.utils import formatdate
from typing import Any

from aiohttp import web

log = logging.getLogger("scalesched.serve")

MAX_LINE = 8190
"""Longest header line taken here (aiohttp's own limit; longer ones go to aiohttp)."""
KEEPALIVE_S = 75.0
"""An idle connection is closed after this long (aiohttp's default keep-alive timeout)."""
PATHS = {"/v1/chat/completions": True, "/v1/completions": False}
"""The routes served here, and whether each is chat."""
_REFUSED = ("transfer-encoding", "content-encoding", "expect", "upgrade")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""A header name as HTTP allows it (RFC 9110 token)."""

Quick = Callable[
    ["FrontRequest", bytes, dict[str, str], str, bool],
    Coroutine[Any, Any, web.StreamResponse] | None,
]
"""The gateway's fast path: the request (for logs), its body, its headers (lower-case
names), the upstream path and whether it is chat; a coroutine answering it, or None when
aiohttp must serve it."""


class FrontRequest:
    """What the gateway's refusals read off a request (``method``, ``raw_path``,
    ``remote``, ``headers``), for the calls served here."""

    __slots__ = ("headers", "method", "raw_path", "remote")

    def __init__(self, path: str, headers: dict[str, str], remote: str | None) -> None:
        self.method, self.raw_path, self.headers, self.remote = "POST", path, headers, remote


class FrontSite(web.TCPSite):
    """A TCP site whose connections start with :class:`Front` (aiohttp's handler behind)."""

    def __init__(
        self, runner: web.AppRunner, host: str, port: int, quick: Quick, max_body: int
    ) -> None:
        super().__init__(runner, host, port)
        self.quick, self.max_body = quick, max_body
        self.open: set[Front] = set()

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: Front(server, self.quick, self.open, self.max_body), self._host, self._port
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port

    async def stop(self) -> None:
        for front in list(self.open):
            front.transport.close()
        await super().stop()


class Front(asyncio.Protocol):
    """One client connection while its calls take the fast path."""

    transport: asyncio.Transport

    def __init__(
        self, fallback: Callable[[], Any], quick: Quick, open_: set[Front], max_body: int
    ) -> None:
        self.fallback, self.quick, self.open, self.max_body = fallback, quick, open_, max_body
        self.loop = asyncio.get_running_loop()
        self._buf = bytearray()
        self._busy = False
        self._paused = False
        self._closed = False
        self._eof = False
        """The client closed its side: no request comes after those it sent."""
        self._active = 0.0
        self._idle: asyncio.TimerHandle | None = None
        self.remote: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        self.remote = str(peer[0]) if isinstance(peer, tuple) else None
        self.open.add(self)
        self._active = self.loop.time()
        self._idle = self.loop.call_at(self._active + KEEPALIVE_S, self._check_idle)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._stop()

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._busy:
            self._next()
        elif len(self._buf) > self.max_body + MAX_LINE and not self._paused:
            self._paused = True  # pipelined bytes pile up behind a call: read no more now
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        self._eof = True
        if self._buf or self._busy:
            return self._hand_over(eof=True)
        return None

    # -- inside ------------------------------------------------------------------------------
    def _stop(self) -> None:
        self.open.discard(self)
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _check_idle(self) -> None:
        due = self._active + KEEPALIVE_S
        if self._busy or self.loop.time() < due:
            self._idle = self.loop.call_at(max(due, self.loop.time() + 1.0), self._check_idle)
        else:
            self._idle = None
            self.transport.close()

    def _next(self) -> None:
        """Serve the buffered request if it is complete and fits the fast path."""
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:  # a head split across reads (a whole one skips these checks)
            if len(buf) > MAX_LINE or not _may_take(buf) or b"\n\n" in buf:
                # aiohttp answers a malformed start, or lines ended by LF alone, now: the
                # blank line this path waits for may never come
                self._hand_over()
            return
        parsed = _parse_head(bytes(buf[:end]), self.max_body)
        if parsed is None:
            self._hand_over()
            return
        path, chat, headers, length = parsed
        if len(buf) < end + 4 + length:
            return  # the body is still coming
        body = bytes(buf[end + 4 : end + 4 + length])
        request = FrontRequest(path, headers, self.remote)
        try:
            answer = self.quick(request, body, headers, path, chat)
        except Exception:  # a bug in the check: aiohttp's path answers it (a 500 at worst)
            answer = None
        if answer is None:
            self._hand_over()
            return
        del buf[: end + 4 + length]
        self._busy = True
        self.loop.create_task(self._serve(answer))

    async def _serve(self, answer: Coroutine[Any, Any, web.StreamResponse]) -> None:
        try:
            response = await answer
        except Exception:  # the gateway answers its own errors; this is a last resort
            log.exception("the fast path failed; the connection is closed")
            self.transport.abort()
            return
        self._busy = False
        self._active = self.loop.time()
        if self._closed:
            return
        self.transport.write(_wire(response))
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        if self._buf:
            self._next()
        if self._eof and not self._busy and self in self.open:
            self._last_answered()

    def _last_answered(self) -> None:
        """The client closed its side after its requests and the last was answered here:
        close (it was held open until keep-alive's end); bytes of a request left unfinished
        go to aiohttp with the end, as a request cut short does."""
        if not self._buf or not self._hand_over(eof=True):
            self.transport.close()

    def _hand_over(self, eof: bool = False) -> bool | None:
        """aiohttp serves this connection from now on, starting with the buffered bytes."""
        if self._busy:  # a pipelined request behind one in progress: wait for its answer
            return True
        self._stop()
        handler = self.fallback()
        self.transport.set_protocol(handler)
        handler.connection_made(self.transport)
        if self._buf:
            data, self._buf = bytes(self._buf), bytearray()
            handler.data_received(data)
        result: bool | None = handler.eof_received() if eof else None
        return result


_STARTS = tuple(f"POST {path} ".encode() for path in PATHS)
"""How every request the fast path takes begins."""


def _may_take(buf: bytearray) -> bool:
    """Whether a head not yet whole may still be one the fast path takes: its first bytes
    begin one of :data:`_STARTS` (at most 26 bytes compared, only while a head is split
    across reads). Any other start is aiohttp's at once: bytes that are not HTTP (a TLS
    handshake, a garbage line) get its 400 without waiting for a blank line that may
    never come."""
    return any(buf[: len(start)] == start[: len(buf)] for start in _STARTS)


def _parse_head(head: bytes, max_body: int) -> tuple[str, bool, dict[str, str], int] | None:
    """The path, whether chat, the headers (lower-case names) and the body's length of a
    request the fast path takes; None for any other."""
    text = head.decode("latin-1")
    if not text.isascii() or not text.replace("\r\n", "").isprintable():
        return None  # a control character (a tab too) or a byte past ASCII: aiohttp decides
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[0] != "POST" or parts[2] != "HTTP/1.1":
        return None
    chat = PATHS.get(parts[1])
    if chat is None:
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or len(line) > MAX_LINE or not _TOKEN.fullmatch(name):
            return None  # also a space before the colon, which aiohttp refuses
        key = name.lower()
        if key in _REFUSED or key in headers:
            return None  # a repeated header too: aiohttp's rules decide
        headers[key] = value.strip()
    length = headers.get("content-length")
    if length is None or not length.isdigit() or int(length) > max_body:
        return None
    connection = headers.get("connection")
    if connection is not None and connection.lower() != "keep-alive":
        return None
    return parts[1], chat, headers, int(length)


_date = ["", 0]


def _http_date() -> str:
    now = int(time.time())
    if now != _date[1]:
        _date[0], _date[1] = formatdate(now, usegmt=True), now
    return str(_date[0])


def _wire(response: web.StreamResponse) -> bytes:
    """A whole response as bytes: status line, its headers, Content-Length, Date, body."""
    assert isinstance(response, web.Response)
    body = response.body
    data = body if isinstance(body, bytes) else b""
    head = [f"HTTP/1.1 {response.status} {response.reason}"]
    head += [f"{k}: {v}" for k, v in response.headers.items() if k.lower() != "content-length"]
    head.append(f"Content-Length: {len(data)}")
    head.append(f"Date: {_http_date()}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
