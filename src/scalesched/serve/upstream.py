"""The gateway's upstream client: HTTP/1.1 to one backend over a pool of keep-alive
connections, each an :class:`asyncio.Protocol` that writes a call's request as one buffer
and reads the answer with a small incremental parser (status line, headers, a body framed
by ``Content-Length``, chunked transfer coding, or the connection's end).

Why hand-written rather than aiohttp's pooled client (what the gateway used before): a
gateway is one server and one client per call, and aiohttp's client was the largest share
of its CPU. ``benchmarks/bench_gateway_steps.py`` (5 December 2026, uvloop, one process,
best of 5): an aiohttp server with aiohttp's client costs 106 us a call, with this client
50 us, with a bare keep-alive socket 40 us; so aiohttp's client spends about 66 us a call
above the socket (request and response objects, timers per timeout, its ``StreamReader``,
a task per request body), this one about 10. Under ``benchmarks/bench_serve.py``'s load the
gateway's CPU per call fell from 0.73-0.76 ms to 0.56-0.57 with it
(docs/history/serve.md). What a gateway's client needs is narrow: POST a body it already
has as bytes, to a few known backends, over HTTP/1.1, and either take the whole answer or
relay its bytes as they come. So each backend gets a :class:`Pool` whose request heads are
built once per path, and a call costs one ``write``, one or two ``data_received`` and, for
an answer taken whole, one wake-up of the caller once the body is complete. httptools and
h11 were not measured: httptools is not installed here (aiohttp bundles its own llhttp,
privately), and h11 is pure Python with an event object per part, the churn this module
avoids.

Timeouts cost one timer per call: it fires at the earlier of the call's total deadline
and (a streamed call) the last byte's time plus the idle timeout, and when it fires early
it only moves itself. Errors are :class:`UpstreamError` (a stalled or overdue call, a
connection that broke, an answer that is not HTTP), or ``OSError`` from connecting.

A pooled connection the backend closed while idle is dropped from the pool when its end
arrives; a call on a reused connection that ends before a byte of the answer (the backend
closed it as the request went out) is sent again on the next pooled connection or a new
one, as HTTP/1.1 clients do (a new connection's failure is final): a keep-alive race is not
the backend's failure. Answers are not decompressed:
no ``Accept-Encoding`` is sent, so a backend answers in identity coding.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from urllib.parse import unquote, urlsplit

MAX_HEAD_BYTES = 64 * 1024
"""A status line and headers longer than this are not an HTTP answer the gateway reads."""
MAX_IDLE = 256
"""Idle keep-alive connections kept per backend (more are closed as they come back)."""
PAUSE_BYTES = 1 << 18
"""A streamed answer's bytes buffered before reading from the backend pauses (the client
reads slower than the backend writes)."""

# Parser states.
_HEAD, _LENGTH, _SIZE, _DATA, _CRLF, _TRAILER, _TO_EOF, _DONE, _IDLE = range(9)


class UpstreamError(Exception):
    """A call failed after its connection was made. ``answered``: the status line had
    come (the backend broke off its answer rather than never starting it)."""

    answered = False


class IdleTimeout(UpstreamError):
    """A streamed call's backend sent nothing for its idle timeout."""


class Deadline(UpstreamError):
    """A call did not finish within its total deadline."""


class Broken(UpstreamError):
    """The connection closed or reset before the answer was complete."""


class NotHTTP(UpstreamError):
    """The backend's bytes are not an HTTP/1.x answer."""


class Pool:
    """Keep-alive connections to one backend (``scheme://host:port``) and the calls over
    them."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.ssl = ssl.create_default_context()
        self.port = parts.port or (443 if self.ssl else 80)
        headers = {"Host": parts.netloc.rpartition("@")[2], **headers}
        if parts.username is not None and "Authorization" not in headers:
            user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._heads: dict[tuple[str, str], bytes] = {}
        self._idle: list[Connection] = []
        self.closed = False
        self.loop = asyncio.get_running_loop()  # made in its loop; looked up once, not per call

    def _head(self, method: str, path: str) -> bytes:
        """The request's head up to its ``Content-Length`` value (built once a path)."""
        key = (method, path)
        head = self._heads.get(key)
        if head is None:
            head = f"{method} {path} HTTP/1.1\r\n{self._fixed}Content-Length: ".encode("latin-1")
            self._heads[key] = head
        return head

    async def call(
        self,
        method: str,
        path: str,
        body: bytes,
        total_s: float,
        idle_s: float | None = None,
        stream: bool = False,
    ) -> Connection:
        """Send a request; the connection that holds its answer, once the whole answer has
        come (``stream`` False) or its status line and headers (``stream`` True: the body
        is read with :meth:`Connection.read_chunk`). The caller ends every call with
        :meth:`Connection.release`. ``idle_s``: a streamed call's idle timeout."""
        loop = self.loop
        deadline = loop.time() + total_s
        request = self._head(method, path) + b"%d\r\n\r\n" % len(body) + body
        while True:
            conn, reused = self._reuse(), True
            if conn is None:
                conn, reused = await self._connect(loop, deadline), False
            conn.start(request, deadline, idle_s, stream)
            try:
                await conn.answer()
            except Broken as exc:
                conn.release()
                if reused and not exc.answered and not conn.got_bytes:
                    continue  # the backend closed it as the request went out: once anew
                raise
            except BaseException:
                conn.release()
                raise
            return conn

    def _reuse(self) -> Connection | None:
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.state == _IDLE and not conn.transport.is_closing():
                return conn
        return None

    async def _connect(self, loop: asyncio.AbstractEventLoop, deadline: float) -> Connection:
        try:
            async with asyncio.timeout_at(deadline):
                _, conn = await loop.create_connection(
                    lambda: Connection(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None,
                )
        except TimeoutError:
            raise Deadline("did not connect within the deadline") from None
        return conn

    def keep(self, conn: Connection) -> None:
        if self.closed or len(self._idle) >= MAX_IDLE:
            conn.transport.close()
        else:
            self._idle.append(conn)

    def forget(self, conn: Connection) -> None:
        if conn in self._idle:
            self._idle.remove(conn)

    def close(self) -> None:
        """Close the idle connections (those in calls close as their calls end)."""
        self.closed = True
        for conn in self._idle:
            conn.transport.close()
        self._idle.clear()


class Connection(asyncio.Protocol):
    """One keep-alive connection, and while a call is on it, that call's answer:
    ``status``, ``headers`` (lower-case names, the last of a repeated one) and its body."""

    transport: asyncio.Transport

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.loop = pool.loop
        self.state = _IDLE
        self.status = 0
        self.headers: dict[str, str] = {}
        self.got_bytes = False
        self._buf = bytearray()
        self._left = 0
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._stream = False
        self._keep_alive = True
        self._error: UpstreamError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        self._idle_s: float | None = None
        self._last = 0.0

    # -- asyncio's side --------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        if self._idle_s is not None:
            self._last = self.loop.time()
        if self.state == _LENGTH and not self._buf and len(data) <= self._left:
            self._left -= len(data)  # the common case: body bytes, no framing to parse
            self._body(data)
            if not self._left:
                self._finish()
            return
        self._buf += data
        try:
            self._parse()
        except UpstreamError as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.state == _TO_EOF:
            if self._buf:
                self._body(bytes(self._buf))
                self._buf.clear()
            self._finish()
        elif self.state == _IDLE or self.state == _DONE:
            self.pool.forget(self)
        else:
            why = f": {exc}" if exc else ""
            self._fail(Broken(f"the connection closed before the answer was complete{why}"))
        self._keep_alive = False

    # -- a call ----------------------------------------------------------------------------
    def start(self, request: bytes, deadline: float, idle_s: float | None, stream: bool) -> None:
        self.state, self.status, self.headers = _HEAD, 0, {}
        self.got_bytes, self._error, self._stream = False, None, stream
        self._deadline, self._idle_s = deadline, idle_s
        at = deadline
        if idle_s is not None:
            self._last = self.loop.time()
            at = min(at, self._last + idle_s)
        self._timer = self.loop.call_at(at, self._tick)
        self.transport.write(request)

    async def answer(self) -> None:
        """Wait for the answer (its head for a streamed call, all of it otherwise)."""
        while self._error is None and (self.state < _DONE if not self._stream else not self.status):
            await self._wait()
        if self._error is not None:
            raise self._error

    def body(self) -> bytes:
        """A whole answer's body."""
        chunks = self._chunks
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        return data

    async def read_chunk(self) -> bytes:
        """A streamed answer's bytes that came since the last read, waiting for some;
        ``b""`` at its end. An error is raised once the bytes before it are read."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self.state == _DONE:
                return b""
            await self._wait()
        data = self.body()
        self._buffered = 0
        if self._paused:
            self._paused = False
            self.transport.resume_reading()
        return data

    async def read_all(self) -> bytes:
        """The rest of the answer's body."""
        while self._error is None and self.state < _DONE:
            await self._wait()
        if self._error is not None:
            raise self._error
        return self.body()

    def release(self) -> None:
        """End the call: the connection goes back to its pool if the answer was read to
        its end and both sides keep it alive, else it is closed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._chunks.clear()
        if self.state == _DONE and self._keep_alive and not self._buf:
            self.state = _IDLE
            self.pool.keep(self)
        else:
            self.state = _DONE
            self._keep_alive = False
            self.transport.abort()

    # -- inside -----------------------------------------------------------------------------
    async def _wait(self) -> None:
        self._waiter = waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _tick(self) -> None:
        now = self.loop.time()
        if now >= self._deadline:
            self._timer = None
            self._fail(Deadline("did not finish within its deadline"))
        elif self._idle_s is not None and now - self._last >= self._idle_s:
            self._timer = None
            self._fail(IdleTimeout("sent nothing for its idle timeout"))
        else:
            at = self._deadline
            if self._idle_s is not None:
                at = min(at, self._last + self._idle_s)
            self._timer = self.loop.call_at(at, self._tick)

    def _fail(self, error: UpstreamError) -> None:
        if self._error is not None or self.state >= _DONE:
            return
        error.answered = self.status != 0
        self._error, self._keep_alive = error, False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.transport.abort()
        self._wake()

    def _finish(self) -> None:
        self.state = _DONE
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._wake()

    def _body(self, data: bytes) -> None:
        self._chunks.append(data)
        if self._stream:
            self._buffered += len(data)
            if self._buffered > PAUSE_BYTES and not self._paused:
                self._paused = True
                self.transport.pause_reading()
            self._wake()

    def _parse(self) -> None:
        """Consume the buffer as far as it goes (one state per pass)."""
        buf = self._buf
        while buf:
            state = self.state
            if state == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise NotHTTP(f"an answer head over {MAX_HEAD_BYTES} bytes")
                    return
                head = bytes(buf[:end])
                del buf[: end + 4]
                self._read_head(head)
            elif state in (_LENGTH, _DATA):
                take = min(self._left, len(buf))
                self._body(bytes(buf[:take]))
                del buf[:take]
                self._left -= take
                if self._left:
                    return
                if state == _LENGTH:
                    self._finish()
                else:
                    self.state = _CRLF
            elif state in (_SIZE, _TRAILER):
                end = buf.find(b"\r\n")
                if end < 0:
                    if len(buf) > MAX_HEAD_BYTES:
                        raise NotHTTP("a chunk size line or trailer too long")
                    return
                line = bytes(buf[:end])
                del buf[: end + 2]
                if state == _TRAILER:
                    if not line:
                        self._finish()
                    continue
                self._chunk_size(line)
            elif state == _CRLF:
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise NotHTTP("a chunk not ended by CRLF")
                del buf[:2]
                self.state = _SIZE
            elif state == _TO_EOF:
                self._body(bytes(buf))
                buf.clear()
            else:  # bytes after a complete answer: the connection is not reused
                self._keep_alive = False
                return

    def _chunk_size(self, line: bytes) -> None:
        try:
            size = int(line.partition(b";")[0].strip(), 16)
        except ValueError:
            raise NotHTTP(f"a chunk size that is not hexadecimal: {line[:40]!r}") from None
        if size < 0:
            raise NotHTTP("a negative chunk size")
        if size:
            self._left, self.state = size, _DATA
        else:
            self.state = _TRAILER

    def _read_head(self, head: bytes) -> None:
        """The status line and headers; then how the body is framed."""
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or not code.isdigit():
            raise NotHTTP(f"not an HTTP/1.x status line: {lines[0][:60]!r}")
        headers = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon:
                raise NotHTTP(f"a header line without a colon: {line[:60]!r}")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        status = int(code)
        if 100 <= status < 200:
            return  # an interim answer (100 Continue and the like): the real one follows
        self.status, self.headers = status, headers
        connection = headers.get("connection", "").lower()
        self._keep_alive = version == b"HTTP/1.1" and connection != "close"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = _SIZE
        elif "content-length" in headers:
            length = headers["content-length"]
            if not length.isdigit():
                raise NotHTTP(f"a Content-Length that is not a number: {length[:40]!r}")
            self._left = int(length)
            self.state = _LENGTH
            if not self._left:
                self._finish()
        elif status == 204 or status == 304:
            self._finish()
        else:
            self.state, self._keep_alive = _TO_EOF, False
        if self._stream:
            self._wake()
