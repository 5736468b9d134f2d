"""Replay hostile cases against live ``serve``, ``engine``, ``fleet`` and ``loadgen``
processes and count tracebacks, wrong answers, hangs and lost requests.

    python benchmarks/hostile_serve.py [--only a,b]

What docs/serve-faults.md promises, checked case by case against real processes on
127.0.0.1 (nothing else is reached): bad bodies and fields, unknown models, routes and
methods, a body over 1 MiB (on the gateway's fast path, its aiohttp path and after a call
its fast path served on the same connection; on an engine; plain and streamed); malformed
HTTP over a raw socket; upstream faults from fake backends written here (refused, 500, not
JSON, not events, broken or stalled streams, cut headers); back-off and every backend
down; a client gone mid-stream; 429; bad backends files and busy ports; ``loadgen``'s URL
checks, exit codes and strict JSON; and a short load through ``serve`` to a ``fleet``
whose counts must match the gateway's ``/metrics``. Every case is one line of output and
one verdict: ``ok``, ``traceback`` (one in a log or on stderr), ``wrong`` (an answer or
exit that differs from the table, or a log that is not one line per fault), ``hang`` (no
answer within its deadline) or ``lost`` (a call that got no answer where one is due, or
counts that do not add up). Exit 1 if any case is not ``ok``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
DEADLINE_S = 10.0
"""Longest wait for one answer: past it, the case is a hang."""
START_S = 30.0
"""Longest wait for a server to say it serves."""
EXIT_S = 30.0
"""Longest wait for a command that must exit by itself."""
MODEL = "llama-2-7b"
CHAT: dict[str, Any] = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "hello there"}],
    "max_tokens": 2,
}
VERDICTS = ("ok", "traceback", "wrong", "hang", "lost")


class Wrong(Exception):
    """An answer, exit or log that differs from the table."""


class Hang(Exception):
    """No answer within the deadline."""


class Lost(Exception):
    """A call that got no answer where one is due, or counts that do not add up."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


# -- processes ------------------------------------------------------------------------------


class Proc:
    """A ``scalesched`` command in its own process, its stdout and stderr in files."""

    every: list[Proc] = []

    def __init__(self, name: str, args: list[str], tmp: Path) -> None:
        self.name = name
        self.err_path, self.out_path = tmp / f"{name}.err", tmp / f"{name}.out"
        self._err, self._out = self.err_path.open("wb"), self.out_path.open("wb")
        self.serve = args[0] == "serve"
        cmd = [sys.executable, "-m", "scalesched", *args]
        self.p = subprocess.Popen(cmd, stdout=self._out, stderr=self._err, cwd=tmp)
        Proc.every.append(self)

    def err(self) -> str:
        return self.err_path.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = START_S) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if needle in self.err():
                return
            if self.p.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.p.returncode}: {self.err()[-500:]}")
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not say {needle!r} within {timeout:g} s")

    def mark(self) -> int:
        return self.err_path.stat().st_size

    def since(self, mark: int, settle: float = 0.1) -> list[str]:
        """The log lines written after ``mark`` (waiting ``settle`` s for late ones)."""
        time.sleep(settle)
        with self.err_path.open("rb") as f:
            f.seek(mark)
            return f.read().decode(errors="replace").splitlines()

    def stop(self) -> None:
        if self.p.poll() is None:  # serve stops on SIGTERM, as a service manager asks
            self.p.send_signal(signal.SIGTERM if self.serve else signal.SIGINT)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=10)
        self._err.close()
        self._out.close()


def run_command(args: list[str], tmp: Path, timeout: float = EXIT_S) -> tuple[int, str, str, float]:
    """A command that must exit by itself: its code, stdout, stderr and wall seconds."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "scalesched", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=tmp,
        )
    except subprocess.TimeoutExpired:
        raise Hang(f"did not exit within {timeout:g} s") from None
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


# -- a raw HTTP client ---------------------------------------------------------------------


@dataclass
class Answer:
    status: int | None
    """None: the connection closed without an answer."""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def error(self) -> dict[str, Any]:
        """The OpenAI error object of the answer (a Wrong unless it is one)."""
        try:
            doc = json.loads(self.body)
        except ValueError:
            raise Wrong(f"{self.status} body is not JSON: {self.body[:80]!r}") from None
        err = doc.get("error") if isinstance(doc, dict) else None
        keys = {"message", "type", "param", "code"}
        if not isinstance(err, dict) or set(err) != keys or not isinstance(err["message"], str):
            raise Wrong(f"{self.status} body is not an OpenAI error object: {self.body[:120]!r}")
        return err


def request(method: str, path: str, body: bytes = b"", *headers: str, length: bool = True) -> bytes:
    head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}", *headers]
    if length and (body or method == "POST"):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def with_headers(data: bytes, *headers: str) -> bytes:
    """``data`` (a request) with ``headers`` added at the end of its head."""
    extra = "".join(f"\r\n{h}" for h in headers).encode("latin-1")
    return data.replace(b"\r\n\r\n", extra + b"\r\n\r\n", 1)


def post(path: str, doc: Any, *headers: str) -> bytes:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return request("POST", path, raw, "Content-Type: application/json", *headers)


class Conn:
    """One client connection and its unread bytes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=DEADLINE_S)
        self.buf = bytearray()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the server may close at once (a bad head)
            self.sock.sendall(data)

    def _more(self, end: float) -> bool:
        left = end - time.monotonic()
        if left <= 0:
            raise Hang("no complete answer")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            raise Hang("no complete answer") from None
        except ConnectionError:
            data = b""
        self.buf += data
        return bool(data)

    def _line(self, end: float) -> bytes:
        while (i := self.buf.find(b"\r\n")) < 0:
            if not self._more(end):
                raise Lost("the connection closed mid-answer")
        line = bytes(self.buf[:i])
        del self.buf[: i + 2]
        return line

    def answer(
        self, timeout: float = DEADLINE_S, on_chunk: Callable[[bytes], bool] | None = None
    ) -> Answer:
        """The next answer (chunked, sized or to the end); ``on_chunk`` sees each body
        chunk of a chunked one and may stop reading (returns True)."""
        end = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            if not self._more(end):
                if self.buf:
                    raise Lost(f"the connection closed mid-head: {bytes(self.buf[:60])!r}")
                return Answer(None)
        i = self.buf.find(b"\r\n\r\n")
        head = bytes(self.buf[:i]).decode("latin-1").split("\r\n")
        del self.buf[: i + 4]
        status = int(head[0].split(" ")[1])
        headers = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        body = bytearray()
        if "chunked" in headers.get("transfer-encoding", ""):
            while size := int(self._line(end).split(b";")[0], 16):
                while len(self.buf) < size + 2:
                    if not self._more(end):
                        raise Lost("the connection closed mid-chunk")
                chunk = bytes(self.buf[:size])
                del self.buf[: size + 2]
                body += chunk
                if on_chunk is not None and on_chunk(chunk):
                    return Answer(status, headers, bytes(body))
            self._line(end)
        elif "content-length" in headers:
            n = int(headers["content-length"])
            while len(self.buf) < n:
                if not self._more(end):
                    raise Lost("the connection closed mid-body")
            body, self.buf = self.buf[:n], self.buf[n:]
        else:
            while self._more(end):
                pass
            body, self.buf = self.buf, bytearray()
        return Answer(status, headers, bytes(body))


def call(port: int, data: bytes, timeout: float = DEADLINE_S) -> Answer:
    with Conn(port) as c:
        c.send(data)
        return c.answer(timeout)


def metrics(port: int) -> dict[tuple[str, str], float]:
    """``scalesched_gateway_requests_total`` by (backend, outcome)."""
    text = call(port, request("GET", "/metrics")).body.decode()
    out = {}
    for m in re.finditer(
        r'^scalesched_gateway_requests_total\{backend="([^"]*)",outcome="([^"]*)"\} (\S+)$',
        text,
        re.M,
    ):
        out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def refused_total(port: int) -> float:
    text = call(port, request("GET", "/metrics")).body.decode()
    return sum(
        float(v)
        for v in re.findall(r"^scalesched_gateway_refused_total\{[^}]*\} (\S+)$", text, re.M)
    )


# -- fake backends --------------------------------------------------------------------------

EVENT = b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0}]}\n\n'
COMPLETION = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()
STALL_S = 20.0
"""How long a stalling fake waits before it gives up (the gateway's timeouts are shorter)."""


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, kind: str, length: int | None = None) -> bytes:
    frame = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n{frame}\r\n\r\n".encode()


class Fakes:
    """Backends that misbehave on purpose, each on its own port, served by one asyncio
    loop in a thread. Every backend answers ``/metrics`` (so a masked one opens again on
    the gateway's next scrape) and its completion calls by its mode."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.closed_early: dict[int, int] = {}
        """Per port: streams whose client (the gateway) left before their end."""

    def add(self, mode: str) -> int:
        if mode == "refuse":
            return free_port()  # nothing listens there
        return asyncio.run_coroutine_threadsafe(self._start(mode), self.loop).result(10)

    async def _start(self, mode: str) -> int:
        server = await asyncio.start_server(
            lambda r, w: self._serve(mode, r, w), HOST, 0, limit=1 << 21
        )
        port = int(server.sockets[0].getsockname()[1])
        self.closed_early[port] = 0
        return port

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    async def _serve(self, mode: str, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), STALL_S)
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = 0
                for line in lines[1:]:
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                body = await r.readexactly(length)
                if not path.endswith("/completions"):
                    text = b'{"object":"list","data":[]}' if path.endswith("/models") else b""
                    status = {"metrics500": 500, "metrics404": 404}.get(mode, 200)
                    w.write(_head(status, "text/plain", len(text)) + text)
                    continue
                stream = bool(json.loads(body).get("stream"))
                if not await self._answer(mode, stream, r, w):
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass
        finally:
            w.transport.abort()

    async def _answer(
        self, mode: str, stream: bool, r: asyncio.StreamReader, w: asyncio.StreamWriter
    ) -> bool:
        """Answer one call by ``mode``; False when the connection is to end."""
        if mode == "continue":  # an interim 100 first, then a good answer
            w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        if mode in ("good", "continue", "metrics404", "metrics500") or (
            mode == "slow" and not await _sleep(1.5)
        ):
            if stream:
                w.write(_head(200, "text/event-stream") + _chunk(EVENT * 3))
                w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            else:
                w.write(_head(200, "application/json", len(COMPLETION)) + COMPLETION)
            return True
        if mode == "eof":  # no framing: the answer ends with the connection
            kind = "text/event-stream" if stream else "application/json"
            body = EVENT * 3 + b"data: [DONE]\n\n" if stream else COMPLETION
            w.write(f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\n\r\n".encode() + body)
            await w.drain()
            return False
        if mode == "e400":
            body = b'{"error": {"message": "bad", "type": "invalid_request_error", '
            body += b'"param": "max_tokens", "code": null}}'
            w.write(_head(400, "application/json", len(body)) + body)
            return True
        if mode == "e500":
            body = b'{"error": {"message": "boom"}}'
            w.write(_head(500, "application/json", len(body)) + body)
            return True
        if mode == "html":
            body = b"<html><body>502 bad gateway</body></html>"
            w.write(_head(200, "text/html", len(body)) + body)
            return True
        if mode == "sse-html":
            w.write(_head(200, "text/event-stream") + _chunk(b"<html>oops</html>") + b"0\r\n\r\n")
            return True
        if mode == "json-stream":
            w.write(_head(200, "application/json", len(COMPLETION)) + COMPLETION)
            return True
        return await self._fault(mode, stream, r, w)

    async def _fault(
        self, mode: str, stream: bool, r: asyncio.StreamReader, w: asyncio.StreamWriter
    ) -> bool:
        if mode == "break-mid":
            if stream:
                w.write(_head(200, "text/event-stream") + _chunk(EVENT) + _chunk(EVENT[:30]))
            else:
                w.write(_head(200, "application/json", 400) + COMPLETION[:20])
            await w.drain()
            await asyncio.sleep(0.05)
            return False
        if mode == "break-first":
            w.write(_head(200, "text/event-stream" if stream else "application/json", None))
            await w.drain()
            return False
        if mode == "mid-headers":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
            await w.drain()
            return False
        if mode == "not-http":
            w.write(b"SSH-2.0-OpenSSH_9.6\r\n")
            await w.drain()
            return False
        if mode == "bad-chunk":
            w.write(_head(200, "text/event-stream") + b"zz\r\n")
            await w.drain()
            await asyncio.sleep(0.05)
            return False
        if mode == "stall-mid":
            if stream:
                w.write(_head(200, "text/event-stream") + _chunk(EVENT))
            else:
                w.write(_head(200, "application/json", len(COMPLETION)) + COMPLETION[:10])
            await w.drain()
        if mode in ("stall-mid", "stall-first"):
            await _until_closed(r, w)
            return False
        if mode == "slow-stream":
            return await self._slow_stream(r, w)
        raise AssertionError(mode)

    async def _slow_stream(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> bool:
        """40 events 0.1 s apart: a stream long enough for its client to leave."""
        w.write(_head(200, "text/event-stream"))
        try:
            for _ in range(40):
                w.write(_chunk(EVENT))
                await w.drain()
                await asyncio.sleep(0.1)
                if r.at_eof() or w.transport.is_closing():
                    raise ConnectionResetError
        except OSError:
            port = w.get_extra_info("sockname")[1]
            self.closed_early[port] += 1
            return False
        w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        return True


async def _sleep(seconds: float) -> bool:
    await asyncio.sleep(seconds)
    return False


async def _until_closed(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    """Send nothing more until the peer closes (bounded by STALL_S)."""
    end = time.monotonic() + STALL_S
    while time.monotonic() < end and not (r.at_eof() or w.transport.is_closing()):
        await asyncio.sleep(0.05)


# -- the replay -----------------------------------------------------------------------------


class TracebackSeen(Exception):
    """A traceback in a log or on stderr."""


@dataclass
class Target:
    name: str
    port: int
    proc: Proc
    front: bool
    """Whether it has the gateway's fast path (then aiohttp's path is a variant)."""


class Replay:
    """Runs cases, one verdict each, and counts them."""

    def __init__(self, tmp: Path, only: tuple[str, ...]) -> None:
        self.tmp, self.only = tmp, only
        self.counts = dict.fromkeys(VERDICTS, 0)
        self.names: list[str] = []

    def wanted(self, group: str) -> bool:
        return not self.only or any(group.startswith(p) or p.startswith(group) for p in self.only)

    def case(self, name: str, check: Callable[[], None]) -> None:
        if self.only and not name.startswith(self.only):
            return
        self.names.append(name)
        t0 = time.monotonic()
        verdict, detail = "ok", ""
        try:
            check()
        except TracebackSeen as exc:
            verdict, detail = "traceback", str(exc)
        except Wrong as exc:
            verdict, detail = "wrong", str(exc)
        except Hang as exc:
            verdict, detail = "hang", str(exc)
        except Lost as exc:
            verdict, detail = "lost", str(exc)
        except Exception as exc:  # the replay's own failure: counted, never hidden
            verdict, detail = "wrong", f"replay error: {type(exc).__name__}: {exc}"
        self.counts[verdict] += 1
        took = time.monotonic() - t0
        print(f"{verdict:9} {took:5.1f}s {name:58} {detail[:240]}", flush=True)


def check_log(proc: Proc, mark: int, count: int | None, needle: str = "") -> list[str]:
    """The lines ``proc`` logged since ``mark``: no traceback, ``count`` of them (None: any)
    and the first containing ``needle``."""
    lines = proc.since(mark)
    if any("Traceback" in line for line in lines):
        raise TracebackSeen(f"{proc.name}: {' | '.join(lines)[:300]}")
    if any(len(line) > 1000 for line in lines):
        raise Wrong(f"{proc.name} logged a line of {max(map(len, lines))} characters")
    if count is not None and len(lines) != count:
        raise Wrong(f"{proc.name} logged {len(lines)} lines, want {count}: {lines!r}"[:300])
    if count and needle not in lines[0]:
        raise Wrong(f"{proc.name} logged {lines[0]!r}, want {needle!r} in it"[:300])
    return lines


ANY = object()


def refusal_check(
    target: Target,
    data: bytes,
    status: int,
    param: Any = ANY,
    *,
    after_call: bool = False,
    allow: str | None = None,
) -> Callable[[], None]:
    """An OpenAI error ``status`` naming ``param``, one log line with the status."""

    def check() -> None:
        mark = target.proc.mark()
        with Conn(target.port) as c:
            if after_call:  # the connection served a good call first (the fast path's)
                c.send(post("/v1/chat/completions", CHAT))
                first = c.answer()
                if first.status != 200:
                    raise Wrong(f"the good call first got {first.status}: {first.body[:100]!r}")
                mark = target.proc.mark()
            c.send(data)
            a = c.answer()
        if a.status is None:
            raise Lost("the connection closed without an answer")
        if a.status != status:
            raise Wrong(f"got {a.status}, want {status}: {a.body[:150]!r}")
        err = a.error()
        if param is not ANY and err["param"] != param:
            raise Wrong(f"param {err['param']!r}, want {param!r}")
        if allow is not None and a.headers.get("allow") != allow:
            raise Wrong(f"Allow: {a.headers.get('allow')!r}, want {allow!r}")
        check_log(target.proc, mark, 1, f"{status} ")

    return check


def answered_check(target: Target, data: bytes) -> Callable[[], None]:
    """A well-formed call: 200 with a completion, nothing logged."""

    def check() -> None:
        mark = target.proc.mark()
        a = call(target.port, data)
        if a.status != 200 or "choices" not in json.loads(a.body or b"{}"):
            raise Wrong(f"got {a.status}, want 200: {a.body[:150]!r}")
        check_log(target.proc, mark, 0)

    return check


def body_cases() -> list[tuple[str, str, Any, tuple[str, ...], int, Any, bool]]:
    """(name, path, body, headers, status, param, gateway only)."""
    chat_path, prompt_path = "/v1/chat/completions", "/v1/completions"
    deep = b"[" * 200_000 + b"]" * 200_000
    msgs = CHAT["messages"]

    def chat(**changes: Any) -> dict[str, Any]:
        return {**CHAT, **changes}

    def content(value: Any) -> dict[str, Any]:
        return chat(messages=[{"role": "user", "content": value}])

    head = b'{"model": "llama-2-7b", "messages": [{"role": "user", "content": "hi"}], '
    out: list[tuple[str, str, Any, tuple[str, ...], int, Any, bool]] = [
        (
            "text-part-5",
            chat_path,
            content([{"type": "text", "text": 5}]),
            (),
            400,
            "messages[0].content[0].text",
            False,
        ),
        (
            "second-part-text-null",
            chat_path,
            content([{"type": "text", "text": "a"}, {"type": "text", "text": None}]),
            (),
            400,
            "messages[0].content[1].text",
            False,
        ),
        ("part-not-object", chat_path, content(["hi"]), (), 400, "messages[0].content[0]", False),
        (
            "part-no-type",
            chat_path,
            content([{"text": "hi"}]),
            (),
            400,
            "messages[0].content[0]",
            False,
        ),
        ("content-number", chat_path, content(5), (), 400, "messages[0].content", False),
        (
            "message-no-role",
            chat_path,
            chat(messages=[{"content": "hi"}]),
            (),
            400,
            "messages[0]",
            False,
        ),
        ("no-messages", chat_path, {"model": MODEL, "max_tokens": 2}, (), 400, "messages", False),
        ("empty-messages", chat_path, chat(messages=[]), (), 400, "messages", False),
        ("no-model", chat_path, {"messages": msgs}, (), 400, "model", False),
        ("model-number", chat_path, chat(model=7), (), 400, "model", False),
        ("unknown-model", chat_path, chat(model="gpt-9"), (), 404, "model", False),
        (
            "model-control-chars",
            chat_path,
            chat(model="a\nb\x1b[2J\u2028c"),
            (),
            404,
            "model",
            False,
        ),
        ("model-900k-chars", chat_path, chat(model="m" * 900_000), (), 404, "model", False),
        ("prompt-number", prompt_path, {"model": MODEL, "prompt": 5}, (), 400, "prompt", False),
        ("stream-string", chat_path, chat(stream="yes"), (), 400, "stream", False),
        ("not-json", chat_path, b"{nope", (), 400, None, False),
        ("not-utf8", chat_path, b'{"model": "\xff\xfe"}', (), 400, None, False),
        ("body-array", chat_path, b"[]", (), 400, None, False),
        ("body-empty", chat_path, b"", (), 400, None, False),
        ("deep-200k", chat_path, deep, (), 400, None, False),
        ("deep-200k-field", chat_path, head + b'"x": ' + deep + b"}", (), 400, None, False),
        (
            "int-5000-digits",
            chat_path,
            head + b'"max_tokens": ' + b"9" * 5000 + b"}",
            (),
            400,
            None,
            False,
        ),
        ("max-tokens-nan", chat_path, head + b'"max_tokens": NaN}', (), 400, "max_tokens", False),
        ("gzip-not-gzip", chat_path, b"abcd", ("Content-Encoding: gzip",), 400, None, False),
        (
            "deflate-not-deflate",
            chat_path,
            b"abcd",
            ("Content-Encoding: deflate",),
            400,
            None,
            False,
        ),
        (
            "gzip-over-1mib-decoded",
            chat_path,
            gzip.compress(b" " * (2 << 20)),
            ("Content-Encoding: gzip",),
            413,
            None,
            False,
        ),
        (
            "deflate-cut-short",
            chat_path,
            zlib.compress(json.dumps(CHAT).encode())[:-6],
            ("Content-Encoding: deflate",),
            400,
            None,
            False,
        ),
        ("br-not-read", chat_path, b"abcd", ("Content-Encoding: br",), 400, None, False),
        ("over-1mib", chat_path, content("x" * (1 << 20)), (), 413, None, False),
        (
            "output-est-abc",
            chat_path,
            CHAT,
            ("x-task-output-est: abc",),
            400,
            "x-task-output-est",
            True,
        ),
        ("hint-nan", chat_path, CHAT, ("x-task-hint: nan",), 400, "x-task-hint", True),
    ]
    for value in ("8", 0, -1, 1.5, True, 2**70, [2]):
        out.append(
            (
                f"max-tokens-{value!r}",
                chat_path,
                chat(max_tokens=value),
                (),
                400,
                "max_tokens",
                False,
            )
        )
    out.append(
        (
            "max-completion-tokens-str",
            chat_path,
            chat(max_completion_tokens="x"),
            (),
            400,
            "max_tokens",
            False,
        )
    )
    for value in ("high", 2**64, -(2**63) - 1, 1.5, True, [1]):
        out.append(
            (f"priority-{value!r}", chat_path, chat(priority=value), (), 400, "priority", False)
        )
    return out


def chunked(body: bytes, size: int = 1 << 16) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def route_cases() -> list[tuple[str, bytes, int, str | None]]:
    """(name, request, status, Allow)."""
    return [
        ("route-v2", request("GET", "/v2/chat"), 404, None),
        ("route-embeddings", post("/v1/embeddings", CHAT), 404, None),
        ("route-encoded-newline", request("GET", "/v1/%0Aevil"), 404, None),
        ("route-traversal", request("GET", "/v1/../../etc/passwd"), 404, None),
        ("route-query-unknown", post("/v1/chat/completionsx?a=1", CHAT), 404, None),
        ("method-get-chat", request("GET", "/v1/chat/completions"), 405, "POST"),
        (
            "method-put-completions",
            post("/v1/completions", CHAT).replace(b"POST", b"PUT", 1),
            405,
            "POST",
        ),
        ("method-delete-metrics", request("DELETE", "/metrics"), 405, "GET, HEAD"),
        ("method-post-models", post("/v1/models", CHAT), 405, "GET, HEAD"),
    ]


def request_fault_cases(r: Replay, target: Target) -> None:
    """Every bad body, route and method on ``target``: on the fast path (a plain keep-alive
    request), on aiohttp's path (``Connection: close``, which the fast path leaves to
    aiohttp), after a good call on the same connection, plain and streamed."""
    vias = [("front", (), False), ("aiohttp", ("Connection: close",), False)]
    vias.append(("after-call", (), True))
    if not target.front:
        vias = [("plain", (), False), ("after-call", (), True)]
    for name, path, body, headers, status, param, gateway_only in body_cases():
        if gateway_only and not target.front:
            continue
        streams = [False, True] if isinstance(body, dict) and "stream" not in body else [False]
        for via, via_headers, after in vias:
            for stream in streams:
                if stream and via == "after-call":
                    continue
                doc = {**body, "stream": True} if stream else body
                data = post(path, doc, *headers, *via_headers)
                label = f"{target.name}/{via}/{name}{'/stream' if stream else ''}"
                r.case(label, refusal_check(target, data, status, param, after_call=after))
    big = json.dumps({**CHAT, "messages": [{"role": "user", "content": "x" * (1 << 20)}]})
    for via, via_headers, after in vias:
        data = request(
            "POST",
            "/v1/chat/completions",
            chunked(big.encode()),
            "Transfer-Encoding: chunked",
            *via_headers,
            length=False,
        )
        r.case(
            f"{target.name}/{via}/chunked-over-1mib",
            refusal_check(target, data, 413, None, after_call=after),
        )
    plain = json.dumps(CHAT).encode()
    for coding, body in (
        ("gzip", gzip.compress(plain)),
        ("deflate", zlib.compress(plain)),
        ("deflate", zlib.compress(plain)[2:-4]),  # raw deflate, without zlib's header
        ("identity", plain),
    ):
        data = post("/v1/chat/completions", body, f"Content-Encoding: {coding}")
        r.case(f"{target.name}/encoded-{coding}-{len(body)}", answered_check(target, data))
    for name, data, status, allow in route_cases():
        for via, via_headers, after in vias:
            raw = with_headers(data, *via_headers)
            label = f"{target.name}/{via}/{name}"
            r.case(label, refusal_check(target, raw, status, ANY, after_call=after, allow=allow))


def malformed_cases() -> list[tuple[str, bytes, bool]]:
    """(name, bytes, whether the client then closes its side)."""
    path = "/v1/chat/completions"
    body = json.dumps(CHAT).encode()
    typed = "Content-Type: application/json"

    def sized(*headers: str, data: bytes = body) -> bytes:
        return request("POST", path, data, typed, *headers, length=False)

    return [
        (
            "header-line-over-8k",
            sized(f"Content-Length: {len(body)}", "x-pad: " + "a" * 9000),
            False,
        ),
        ("request-line-over-8k", request("GET", "/" + "a" * 9000), False),
        ("ctl-in-workflow-id", post(path, CHAT, "x-workflow-id: a\x01b"), False),
        ("nul-in-workflow-id", post(path, CHAT, "x-workflow-id: a\x00b"), False),
        ("content-length-minus-1", sized("Content-Length: -1"), False),
        ("content-length-abc", sized("Content-Length: abc"), False),
        ("content-length-plus", sized(f"Content-Length: +{len(body)}"), False),
        ("content-length-2^64", sized(f"Content-Length: {2**64}"), False),
        ("content-length-twice", sized(f"Content-Length: {len(body)}", "Content-Length: 3"), False),
        (
            "chunked-and-length",
            sized("Transfer-Encoding: chunked", f"Content-Length: {len(body)}", data=b"zz\r\n"),
            False,
        ),
        (
            "chunk-size-not-hex",
            sized("Transfer-Encoding: chunked", data=b"zz\r\nabc\r\n0\r\n\r\n"),
            False,
        ),
        ("body-cut-short", sized(f"Content-Length: {len(body)}", data=body[:10]), True),
        ("header-no-colon", request("GET", "/health", b"", "NoColonHere"), False),
        ("space-before-colon", sized(f"Content-Length : {len(body)}"), False),
        ("garbage-request-line", b"GARBAGE\r\n\r\n", False),
        ("tls-client-hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\0" * 40, True),
        ("tls-client-hello-kept-open", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" + bytes(40), False),
        ("garbage-no-line-end", b"GARBAGE", False),
        ("lf-only-line-ends", b"GET /health HTTP/1.1\nHost: x\n\n", False),
        (
            "lf-only-post",
            request(
                "POST", path, body, typed, f"Content-Length: {len(body)}", length=False
            ).replace(b"\r\n", b"\n"),
            False,
        ),
        ("http2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", False),
        ("version-9", b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", False),
    ]


def malformed_check(
    target: Target, data: bytes, shut: bool, after_call: bool = False
) -> Callable[[], None]:
    """A 400 (plain text allowed) or a closed connection; one log line, no traceback."""

    def check() -> None:
        mark = target.proc.mark()
        with Conn(target.port) as c:
            if after_call:  # a good call first, on the same connection
                c.send(post("/v1/chat/completions", CHAT))
                if (first := c.answer()).status != 200:
                    raise Wrong(f"the good call first got {first.status}")
                mark = target.proc.mark()
            c.send(data)
            if shut:
                with contextlib.suppress(OSError):
                    c.sock.shutdown(socket.SHUT_WR)
            a = c.answer()
        if a.status not in (400, None):
            raise Wrong(f"got {a.status}, want 400 or a closed connection: {a.body[:100]!r}")
        check_log(target.proc, mark, 1, "400 ")

    return check


def pipelined_cases(r: Replay, target: Target) -> None:
    """Several requests in one write, good and bad, on one keep-alive connection: each gets
    its own answer, in order; one log line per bad one."""
    good = post("/v1/chat/completions", CHAT)
    bad = post("/v1/chat/completions", {**CHAT, "max_tokens": "x"})
    deep = post("/v1/chat/completions", b"[" * 200_000 + b"]" * 200_000)
    for name, parts, want in (
        ("good-good-good", [good, good, good], [200, 200, 200]),
        ("good-bad-good", [good, bad, good], [200, 400, 200]),
        ("bad-good", [bad, good], [400, 200]),
        ("good-deep-good", [good, deep, good], [200, 400, 200]),
    ):

        def check(parts: list[bytes] = parts, want: list[int] = want) -> None:
            mark = target.proc.mark()
            with Conn(target.port) as c:
                c.send(b"".join(parts))
                got = [c.answer().status for _ in parts]
            if got != want:
                raise Wrong(f"answers {got}, want {want}")
            check_log(target.proc, mark, want.count(400), "400 ")

        r.case(f"{target.name}/pipelined/{name}", check)

    def bad_then_good() -> None:  # the fast path handed the connection over: still served
        with Conn(target.port) as c:
            for data, status in ((bad, 400), (good, 200), (good, 200)):
                c.send(data)
                if (got := c.answer().status) != status:
                    raise Wrong(f"got {got}, want {status}")

    r.case(f"{target.name}/keep-alive/bad-then-good", bad_then_good)
    if not target.front:
        return  # aiohttp's path closes at a client's end of input, answered or not
    for calls in (1, 2, 3):

        def half_closed(calls: int = calls) -> None:
            """Requests, then the client's side closed: each answered, then the end."""
            with Conn(target.port) as c:
                c.send(good * calls)
                c.sock.shutdown(socket.SHUT_WR)
                got = [c.answer(5).status for _ in range(calls)]
                if got != [200] * calls:
                    raise Wrong(f"answers {got}")
                if c.answer(3).status is not None:
                    raise Wrong("an answer more than asked")

        r.case(f"{target.name}/half-closed/{calls}-calls", half_closed)


def leaver_check(gw: Target, via: tuple[str, ...]) -> Callable[[], None]:
    """A client that leaves while its plain call is in flight (``--max-pending 1``): the
    call still ends (the next call is answered, not 429), and nothing is logged."""

    def check() -> None:
        mark = gw.proc.mark()
        doc = post("/v1/chat/completions", {**CHAT, "model": "m-slow"}, *via)
        with Conn(gw.port) as c:
            c.send(doc)
            time.sleep(0.3)
        time.sleep(1.6)  # the slow fake answers after 1.5 s
        end = time.monotonic() + 5
        while (a := call(gw.port, doc)).status == 429 and time.monotonic() < end:
            time.sleep(0.2)
        if a.status != 200:
            raise Lost(f"the call after a client left got {a.status}: {a.body[:100]!r}")
        check_log(gw.proc, mark, 0)

    return check


# -- upstream faults ------------------------------------------------------------------------

UPSTREAM = [  # (case, the fake's mode, streamed, what the client gets: 502, 503 or event)
    ("refused", "refuse", False, "503"),
    ("refused-stream", "refuse", True, "503"),
    ("e500", "e500", False, "502"),
    ("e500-stream", "e500", True, "502"),
    ("not-json", "html", False, "502"),
    ("html-for-stream", "html", True, "502"),
    ("sse-not-events", "sse-html", True, "502"),
    ("json-for-stream", "json-stream", True, "502"),
    ("break-mid", "break-mid", False, "502"),
    ("break-mid-stream", "break-mid", True, "event"),
    ("break-first", "break-first", False, "502"),
    ("break-first-stream", "break-first", True, "502"),
    ("mid-headers", "mid-headers", False, "502"),
    ("mid-headers-stream", "mid-headers", True, "502"),
    ("not-http", "not-http", False, "502"),
    ("not-http-stream", "not-http", True, "502"),
    ("bad-chunk-stream", "bad-chunk", True, "502"),
    ("stall-first", "stall-first", False, "502"),
    ("stall-first-stream", "stall-first", True, "502"),
    ("stall-mid", "stall-mid", False, "502"),
    ("stall-mid-stream", "stall-mid", True, "event"),
    ("e400", "e400", False, "400"),
    ("e400-stream", "e400", True, "400"),
]
UPSTREAM += [  # the same faults on aiohttp's path (Connection: close), not the fast path
    (f"{case}-aiohttp", mode, stream, expect)
    for case, mode, stream, expect in UPSTREAM
    if case in ("e500", "not-json", "break-mid", "break-mid-stream", "stall-first", "e400")
]
ANSWERED = ("eof", "continue", "metrics404")
"""Modes of well-formed answers in less usual framing: answered in full."""
RETRIED = ("e500", "html", "break-first", "mid-headers", "not-http", "stall-first")
"""Modes a call is retried past, onto a good backend of the same model."""
TIMEOUT_S, IDLE_S = 1.5, 0.5
"""The fake backends' ``timeout_s`` and ``idle_timeout_s``."""


def backend_entry(name: str, model: str, port: int) -> str:
    return (
        f"- name: {name}\n  server_type: h100-80g-x1\n  models: {{{model}: {MODEL}}}\n"
        f"  endpoint: {{base_url: 'http://{HOST}:{port}/v1', timeout_s: {TIMEOUT_S}, "
        f"idle_timeout_s: {IDLE_S}}}\n"
    )


def fault_backends(fakes: Fakes) -> tuple[str, dict[str, int]]:
    """The fault gateway's backends file, and the fakes' ports by backend name."""
    ports: dict[str, int] = {}
    entries = []
    for case, mode, _, _ in UPSTREAM:
        ports[f"fk-{case}"] = fakes.add(mode)
        entries.append(backend_entry(f"fk-{case}", f"m-{case}", ports[f"fk-{case}"]))
    for mode in RETRIED:
        good = fakes.add("good")  # a backends file names each URL once
        ports[f"rb-{mode}"] = fakes.add(mode)
        entries.append(backend_entry(f"rb-{mode}", f"r-{mode}", ports[f"rb-{mode}"]))
        entries.append(backend_entry(f"rg-{mode}", f"r-{mode}", good))
    for mode in ANSWERED:
        ports[f"ok-{mode}"] = fakes.add(mode)
        entries.append(backend_entry(f"ok-{mode}", f"r-ok-{mode}", ports[f"ok-{mode}"]))
    for name, model, mode in (
        ("fk-hold", "m-hold", "e500"),
        ("fk-down-a", "m-down", "refuse"),
        ("fk-down-b", "m-down", "refuse"),
        ("fk-slow-stream", "m-slow-stream", "slow-stream"),
        ("fk-leave-stall", "m-leave-stall", "stall-first"),
        ("fk-metrics500", "m-metrics500", "metrics500"),
    ):
        ports[name] = fakes.add(mode)
        entries.append(backend_entry(name, model, ports[name]))
    return "backends:\n" + "".join(entries), ports


def stream_body(a: Answer) -> list[str]:
    """The events' data of a streamed answer."""
    text = a.body.decode(errors="replace")
    return [e[len("data: ") :] for e in text.split("\n\n") if e.startswith("data: ")]


def upstream_check(gw: Target, case: str, stream: bool, expect: str) -> Callable[[], None]:
    model, backend = f"m-{case}", f"fk-{case}"

    def check() -> None:
        mark = gw.proc.mark()
        t0 = time.monotonic()
        via = ("Connection: close",) if case.endswith("-aiohttp") else ()
        doc = {**CHAT, "model": model, "stream": stream}
        a = call(gw.port, post("/v1/chat/completions", doc, *via))
        took = time.monotonic() - t0
        if a.status is None:
            raise Lost("the connection closed without an answer")
        if took > TIMEOUT_S * 3 + 2:
            raise Hang(f"answered after {took:.1f} s")
        lines = check_log(gw.proc, mark, None)
        if expect == "event":
            events = stream_body(a)
            if a.status != 200 or len(events) < 2 or events[-1] != "[DONE]":
                raise Wrong(f"{a.status}, events {events[-2:]!r}: want an error event, [DONE]")
            err = json.loads(events[-2]).get("error", {})
            if err.get("code") != "backend_failed":
                raise Wrong(f"the last event before [DONE] is {events[-2]!r}")
            if not any(f"call failed: {backend}" in line for line in lines):
                raise Wrong(f"no 'call failed: {backend}' line: {lines!r}"[:300])
            return
        status = int(expect)
        if a.status != status:
            raise Wrong(f"got {a.status}, want {status}: {a.body[:150]!r}")
        err = a.error()
        if status == 400:  # the backend's own answer, passed on as it came
            if err["param"] != "max_tokens":
                raise Wrong(f"not the backend's error: {err!r}")
            return
        if err["param"] != "model" or model not in err["message"]:
            raise Wrong(f"the error does not name the model: {err!r}")
        if status == 503 and not a.headers.get("retry-after", "").isdigit():
            raise Wrong(f"503 without Retry-After: {a.headers!r}")
        answers = [line for line in lines if f" {status} POST " in line]
        if len(answers) != 1:
            raise Wrong(f"want one '{status} POST' line: {lines!r}"[:300])
        if status == 502 and not any(f"call failed: {backend}" in line for line in lines):
            raise Wrong(f"no 'call failed: {backend}' line: {lines!r}"[:300])

    return check


def retry_check(gw: Target, mode: str, stream: bool) -> Callable[[], None]:
    """A model served by a faulty and a good backend: the call is answered in full."""

    def check() -> None:
        mark = gw.proc.mark()
        doc = {**CHAT, "model": f"r-{mode}", "stream": stream}
        a = call(gw.port, post("/v1/chat/completions", doc))
        if a.status != 200:
            raise Wrong(f"got {a.status}, want 200 (retried on the good one): {a.body[:150]!r}")
        if stream:
            events = stream_body(a)
            if events[-1:] != ["[DONE]"] or any('"error"' in e for e in events):
                raise Wrong(f"the stream is not whole: {events!r}"[:200])
        elif "choices" not in json.loads(a.body):
            raise Wrong(f"not a completion: {a.body[:150]!r}")
        check_log(gw.proc, mark, None)

    return check


def hold_check(gw: Target) -> Callable[[], None]:
    """Three 500s in a row hold the backend out: 502 three times, then 503 + Retry-After."""

    def check() -> None:
        doc = post("/v1/chat/completions", {**CHAT, "model": "m-hold"})
        got = [call(gw.port, doc) for _ in range(4)]
        statuses = [a.status for a in got]
        if statuses != [502, 502, 502, 503]:
            raise Wrong(f"statuses {statuses}, want [502, 502, 502, 503]")
        if not got[3].headers.get("retry-after", "").isdigit():
            raise Wrong("the 503 has no Retry-After")
        for a in got:
            a.error()
        time.sleep(1.2)  # the hold (1 s) ends: the next call is a trial; it fails
        trial, held = call(gw.port, doc), call(gw.port, doc)
        if (trial.status, held.status, held.headers.get("retry-after")) != (502, 503, "2"):
            raise Wrong(
                f"after the hold: {trial.status}, then {held.status} Retry-After "
                f"{held.headers.get('retry-after')!r}; want 502, then 503 Retry-After 2"
            )

    return check


def outcomes_check(gw: Target, ports: dict[str, int]) -> Callable[[], None]:
    """Every call a faulty backend failed is counted, none as ok; each broken stream as
    broken_stream."""

    def check() -> None:
        counts = metrics(gw.port)
        bad = [
            n
            for n in ports
            if n.startswith(("fk-", "rb-")) and n not in ("fk-slow-stream", "fk-slow")
        ]
        for name in bad:
            if counts.get((name, "ok"), 0):
                raise Lost(f"{name} counted ok {counts[(name, 'ok')]:g} times")
        for case, _, _, expect in UPSTREAM:
            name = f"fk-{case}"
            failed = counts.get((name, "error"), 0) + counts.get((name, "broken_stream"), 0)
            if expect == "400":
                failed = counts.get((name, "rejected"), 0)
            if expect != "503" and failed < 1:
                raise Lost(f"{name}'s failed call is not counted: {failed:g}")
            if expect == "event" and counts.get((name, "broken_stream"), 0) != 1:
                raise Wrong(f"{name}: broken_stream {counts.get((name, 'broken_stream'))}")
        retried = sum(counts.get((f"rb-{m}", "error"), 0) for m in RETRIED)
        answered = sum(counts.get((f"rg-{m}", "ok"), 0) for m in RETRIED)
        if answered != 2 * len(RETRIED):
            raise Lost(f"the good backends answered {answered:g} of {2 * len(RETRIED)} calls")
        if retried < 1:
            raise Wrong("no call was retried past a faulty backend (none was tried first)")

    return check


def client_gone_check(
    target: Target, model: str, backend: str | None, fakes: Fakes | None = None, port: int = 0
) -> Callable[[], None]:
    """A client that leaves after the first event: nothing logged as a traceback, the call
    counted ``client_gone`` (a gateway), the upstream stopped (a fake), the slot freed (an
    engine)."""

    def check() -> None:
        mark = target.proc.mark()
        doc = {**CHAT, "model": model, "max_tokens": 4000, "stream": True}
        with Conn(target.port) as c:
            c.send(post("/v1/chat/completions", doc))
            a = c.answer(on_chunk=lambda chunk: b"data: " in chunk)
            if a.status != 200:
                raise Wrong(f"got {a.status}: {a.body[:100]!r}")
        end = time.monotonic() + 5
        while True:
            if backend is not None:
                done = metrics(target.port).get((backend, "client_gone"), 0) >= 1
                if fakes is not None:
                    done = done and fakes.closed_early[port] >= 1
            else:
                text = call(target.port, request("GET", "/metrics")).body.decode()
                done = "vllm:num_requests_running" in text and not re.search(
                    r"^vllm:num_requests_running\{[^}]*\} [1-9]", text, re.M
                )
            if done:
                break
            if time.monotonic() > end:
                raise Lost("the call left behind was not ended within 5 s")
            time.sleep(0.1)
        check_log(target.proc, mark, None)

    return check


def leave_stalled_check(gw: Target) -> Callable[[], None]:
    """A client that leaves while its stream waits for a stalled backend's first byte: the
    attempt ends at the idle timeout, counted as failed, nothing as a traceback."""

    def check() -> None:
        mark = gw.proc.mark()
        doc = {**CHAT, "model": "m-leave-stall", "stream": True}
        with Conn(gw.port) as c:
            c.send(post("/v1/chat/completions", doc))
            time.sleep(0.1)
        end = time.monotonic() + 5
        while metrics(gw.port).get(("fk-leave-stall", "error"), 0) < 1:
            if time.monotonic() > end:
                raise Lost("the stalled attempt was not ended within 5 s")
            time.sleep(0.1)
        time.sleep(0.3)
        if metrics(gw.port).get(("fk-leave-stall", "ok"), 0):
            raise Wrong("counted ok")
        check_log(gw.proc, mark, None)

    return check


def overload_check(gw: Target) -> Callable[[], None]:
    """``--max-pending 1``: a second call while one is in flight gets 429, Retry-After: 1,
    not logged; the first is answered."""

    def check() -> None:
        doc = post("/v1/chat/completions", {**CHAT, "model": "m-slow"})
        first: list[Answer] = []
        t = threading.Thread(target=lambda: first.append(call(gw.port, doc)), daemon=True)
        t.start()
        time.sleep(0.5)
        mark = gw.proc.mark()
        a = call(gw.port, doc)
        t.join(DEADLINE_S)
        if a.status != 429 or a.headers.get("retry-after") != "1":
            raise Wrong(f"got {a.status} Retry-After {a.headers.get('retry-after')!r}")
        a.error()
        check_log(gw.proc, mark, 0)
        if not first or first[0].status != 200:
            raise Lost(f"the call in flight got {first[0].status if first else 'nothing'}")

    return check


# -- commands that must refuse --------------------------------------------------------------


def one_line_exit(
    args: list[str], tmp: Path, code: int, *needles: str, within: float | None = None
) -> Callable[[], None]:
    """The command exits ``code`` with one line (``error: ...`` naming each needle), no
    'serving' line and no traceback; within ``within`` seconds if given."""

    def check() -> None:
        rc, out, err, took = run_command(args, tmp)
        text = (out + err).strip()
        if "Traceback" in text:
            raise TracebackSeen(text[-300:])
        if rc != code:
            raise Wrong(f"exit {rc}, want {code}: {text[-200:]!r}")
        lines = err.strip().splitlines()
        if code == 2 and (len(text.splitlines()) != 1 or not text.startswith("error:")):
            raise Wrong(f"want one 'error:' line: {text[-300:]!r}")
        if code == 1 and not (lines and lines[-1].startswith("error:")):
            raise Wrong(f"want a last 'error:' line: {text[-300:]!r}")
        if "serving" in text:
            raise Wrong(f"said serving before it failed: {text!r}")
        missing = [n for n in needles if n not in text]
        if missing:
            raise Wrong(f"{missing!r} not in {text[-200:]!r}")
        if within is not None and took > within:
            raise Wrong(f"took {took:.1f} s, want within {within:g} s")

    return check


BAD_BACKENDS = [  # (case, the entry's lines under "- ", the field the error must name)
    ("port-99999", "base_url: http://127.0.0.1:99999/v1", "base_url"),
    ("port-abc", "base_url: http://127.0.0.1:abc/v1", "base_url"),
    ("port-0", "base_url: http://127.0.0.1:0/v1", "base_url"),
    ("ipv6-unclosed", "base_url: 'http://[::1/v1'", "base_url"),
    ("no-host", "base_url: 'http:///v1'", "base_url"),
    ("no-host-port", "base_url: 'http://:8000/v1'", "base_url"),
    ("ftp", "base_url: ftp://127.0.0.1:8000/v1", "base_url"),
    ("idle-negative", "base_url: http://127.0.0.1:8000/v1, idle_timeout_s: -1", "idle_timeout_s"),
    ("timeout-nan", "base_url: http://127.0.0.1:8000/v1, timeout_s: .nan", "timeout_s"),
    ("typo", "base_url: http://127.0.0.1:8000/v1, timeot_s: 3", "timeot_s"),
]


def backends_cases(r: Replay, tmp: Path) -> None:
    for case, endpoint, needle in BAD_BACKENDS:
        path = tmp / f"bad-{case}.yaml"
        path.write_text(
            "backends:\n- name: gpu-0\n  server_type: h100-80g-x1\n"
            f"  models: {{llama: {MODEL}}}\n  endpoint: {{{endpoint}}}\n"
        )
        args = ["serve", "--backends", str(path), "--port", str(free_port())]
        r.case(f"backends/{case}", one_line_exit(args, tmp, 2, path.name, needle))
    good = "base_url: http://127.0.0.1:8000/v1"
    for case, text, needle in (
        ("no-models", f"- name: g\n  server_type: h100-80g-x1\n  endpoint: {{{good}}}\n", "models"),
        (
            "no-endpoint",
            "- name: g\n  server_type: h100-80g-x1\n  models: {a: llama-2-7b}\n",
            "endpoint",
        ),
        (
            "no-name",
            f"- server_type: h100-80g-x1\n  models: {{a: llama-2-7b}}\n  endpoint: {{{good}}}\n",
            "name",
        ),
        (
            "no-server-type",
            f"- name: g\n  models: {{a: llama-2-7b}}\n  endpoint: {{{good}}}\n",
            "server_type",
        ),
        ("empty", "", "backends"),
    ):
        path = tmp / f"bad-{case}.yaml"
        path.write_text("backends:\n" + text)
        args = ["serve", "--backends", str(path), "--port", str(free_port())]
        r.case(f"backends/{case}", one_line_exit(args, tmp, 2, path.name, needle))
    entry = "- name: a\n  server_type: h100-80g-x1\n  models: {x: MODEL}\n  endpoint: "
    for case, text, needle in (
        ("deep-200k", "[" * 200_000 + "]" * 200_000, "deep"),
        ("not-utf8", "\udcff\udcfe backends", "(file)"),
        ("empty-file", "", "(file)"),
        ("no-backends", "backends: []\n", "backends"),
        (
            "name-twice",
            "backends:\n"
            + "".join(
                entry.replace("MODEL", MODEL) + f"{{base_url: 'http://{HOST}:{p}/v1'}}\n"
                for p in (1, 2)
            ),
            "backends[1].name",
        ),
        (
            "unknown-model",
            "backends:\n"
            + entry.replace("MODEL", "gpt-9")
            + f"{{base_url: 'http://{HOST}:1/v1'}}\n",
            "gpt-9",
        ),
    ):
        path = tmp / f"bad-{case}.yaml"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        args = ["serve", "--backends", str(path), "--port", str(free_port())]
        r.case(f"backends/{case}", one_line_exit(args, tmp, 2, path.name, needle))
    r.case(
        "backends/a-directory",
        one_line_exit(["serve", "--backends", str(tmp)], tmp, 2, "regular file"),
    )
    missing = tmp / "no-such-file.yaml"
    r.case(
        "backends/missing-file",
        one_line_exit(["serve", "--backends", str(missing)], tmp, 2, missing.name),
    )


def free_run(count: int) -> int:
    """The first of ``count`` free ports in a row."""
    for _ in range(50):
        first = free_port()
        if first + count > 65535:
            continue
        taken: list[socket.socket] = []
        try:
            for p in range(first, first + count):
                s = socket.socket()
                taken.append(s)
                s.bind((HOST, p))
        except OSError:
            continue
        finally:
            for s in taken:
                s.close()
        return first
    raise RuntimeError("no run of free ports")


def busy_run(count: int, busy: int) -> tuple[int, socket.socket]:
    """A first port of ``count`` free ones in a row, the ``busy``-th of them listened on."""
    first = free_run(count)
    holder = socket.socket()
    holder.bind((HOST, first + busy))
    holder.listen()
    return first, holder


def port_cases(r: Replay, tmp: Path, backends: Path) -> None:
    engine = ["engine", "--server-type", "h100-80g-x1", "--model", MODEL]
    fleet = ["fleet", "--cluster", "hetero-8", "--residency", "dynamic", "--instant"]
    for name, args in (("serve", ["serve", "--backends", str(backends)]), ("engine", engine)):
        first, holder = busy_run(1, 0)
        with holder:
            check = one_line_exit([*args, "--port", str(first)], tmp, 2, f":{first}", "in use")
            r.case(f"ports/{name}-busy", check)
        r.case(f"ports/{name}-70000", one_line_exit([*args, "--port", "70000"], tmp, 2, "65535"))
    r.case("ports/fleet-past-65535", one_line_exit([*fleet, "--port", "65533"], tmp, 2, "65535"))
    first, holder = busy_run(6, 2)  # hetero-8's dynamic fleet: 6 engines
    out = tmp / "busy-fleet.yaml"
    args = [*fleet, "--port", str(first), "--backends-out", str(out)]
    inner = one_line_exit(args, tmp, 2, f"{HOST}:{first + 2}", "in use")

    def fleet_busy() -> None:
        with holder:
            inner()
        still = []
        for p in range(first, first + 6):
            with socket.socket() as s:
                if s.connect_ex((HOST, p)) == 0:
                    still.append(p)
        if still or out.exists():
            raise Wrong(f"left listening: {still}, backends file written: {out.exists()}")

    r.case("ports/fleet-busy-middle", fleet_busy)


# -- loadgen --------------------------------------------------------------------------------

LOAD = ["--cluster", "hetero-4", "--rate", "2", "--workflows", "4", "--time-scale", "0.02"]
LOAD += ["--timeout-s", "20"]


def strict_json(text: str) -> dict[str, Any]:
    def refuse(word: str) -> Any:
        raise Wrong(f"--json printed {word}")

    try:
        doc = json.loads(text, parse_constant=refuse)
    except ValueError as exc:
        raise Wrong(f"--json printed no JSON object: {exc}: {text[:120]!r}") from None
    if not isinstance(doc, dict):
        raise Wrong(f"--json printed {type(doc).__name__}")
    return doc


def loadgen_cases(r: Replay, tmp: Path, g1: Target, g3: Target) -> None:
    """URL checks (exit 2 within 2 s, one line), failed workflows (exit 1 unless
    --allow-failures), strict JSON."""
    closed = free_port()
    silent = socket.socket()  # listens, never answers: the probe's time limit
    silent.bind((HOST, 0))
    silent.listen(8)
    quiet = silent.getsockname()[1]
    for name, url, needle, within in (
        ("closed-port", f"http://{HOST}:{closed}/v1", "refused", 2.0),
        ("ftp", f"ftp://{HOST}:{g1.port}/v1", "http://", 2.0),
        ("malformed", "http://[::1/v1", "malformed", 2.0),
        ("port-99999", f"http://{HOST}:99999/v1", "--url", 2.0),
        ("no-host", "http:///v1", "host", 2.0),
        ("without-v1", f"http://{HOST}:{g1.port}", "/v1", 2.0),
        ("https-to-http", f"https://{HOST}:{g1.port}/v1", "--url", 2.0),
        ("silent-server", f"http://{HOST}:{quiet}/v1", "--url", 3.0),
    ):
        r.case(
            f"loadgen/{name}",
            one_line_exit(["loadgen", "--url", url, *LOAD], tmp, 2, needle, within=within),
        )
    silent.close()
    some = ["loadgen", "--url", f"http://{HOST}:{g1.port}/v1", *LOAD]  # serves one model
    r.case("loadgen/failed-exit-1", one_line_exit(some, tmp, 1, "--allow-failures"))

    def failed_json() -> None:
        rc, out, err, _ = run_command([*some, "--json"], tmp)
        if "Traceback" in out + err:
            raise TracebackSeen(err[-300:])
        if rc != 1 or len(err.strip().splitlines()) != 1:
            raise Wrong(f"exit {rc}, stderr {err[-200:]!r}: want 1 and one line")
        strict_json(out)

    r.case("loadgen/failed-exit-1-json", failed_json)
    none = ["loadgen", "--url", f"http://{HOST}:{g3.port}/v1", *LOAD]  # serves no model of it

    def allowed(args: list[str], all_failed: bool) -> Callable[[], None]:
        def check() -> None:
            rc, out, err, _ = run_command([*args, "--allow-failures", "--json"], tmp)
            if "Traceback" in out + err:
                raise TracebackSeen(err[-300:])
            if rc != 0:
                raise Wrong(f"exit {rc} with --allow-failures: {err[-200:]!r}")
            doc = strict_json(out)
            if doc.get("workflows_failed", 0) < 1:
                raise Wrong(f"no workflow failed: {doc!r}"[:200])
            if all_failed and doc.get("avg_response_time_s") is not None:
                raise Wrong(f"avg_response_time_s {doc.get('avg_response_time_s')!r}, want null")

        return check

    r.case("loadgen/failed-allowed-json", allowed(some, False))
    r.case("loadgen/all-failed-json-null", allowed(none, True))


def burst_check(g4: Target, clients: int = 16, calls: int = 12) -> Callable[[], None]:
    """Plain calls on the fast path, kept alive, several connections at once, two pipelined
    at a time: every call answered 200, and the gateway counts each once, ok."""

    def check() -> None:
        before = sum(v for (_, o), v in metrics(g4.port).items() if o == "ok")
        statuses: list[int | None] = []

        def client() -> None:
            with Conn(g4.port) as c:
                for _ in range(calls // 2):
                    c.send(post("/v1/chat/completions", CHAT) * 2)
                    statuses.extend([c.answer(30).status, c.answer(30).status])

        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        after = sum(v for (_, o), v in metrics(g4.port).items() if o == "ok")
        want = clients * (calls // 2) * 2
        if statuses.count(200) != want or after - before != want:
            raise Lost(
                f"{statuses.count(200)} of {want} answered 200 ({set(statuses)}), "
                f"gateway counted {after - before:g} ok"
            )

    return check


def lost_check(tmp: Path, g4: Target) -> Callable[[], None]:
    """A short load through serve to a fleet: loadgen's counts are the gateway's."""

    def check() -> None:
        args = ["loadgen", "--url", f"http://{HOST}:{g4.port}/v1", "--json"]
        args += ["--cluster", "hetero-4", "--rate", "1", "--workflows", "6"]
        args += ["--time-scale", "0.02", "--timeout-s", "30"]
        rc, out, err, _ = run_command(args, tmp, timeout=90)
        if "Traceback" in out + err:
            raise TracebackSeen(err[-300:])
        doc = strict_json(out)
        if rc != 0 or doc["workflows_failed"] or doc["requests_failed"]:
            raise Lost(f"exit {rc}: {doc!r}"[:300])
        counts = metrics(g4.port)
        ok = sum(v for (_, outcome), v in counts.items() if outcome == "ok")
        other = sum(v for (_, outcome), v in counts.items() if outcome != "ok")
        refused = refused_total(g4.port)
        if ok != doc["requests"] or other or refused:
            raise Lost(
                f"loadgen sent {doc['requests']}, gateway ok {ok:g}, other {other:g}, "
                f"refused {refused:g}"
            )
        check_log(g4.proc, 0, None)

    return check


# -- main -----------------------------------------------------------------------------------


def one_backend(tmp: Path, name: str, model: str, url: str) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(
        f"backends:\n- name: {name}\n  server_type: h100-80g-x1\n  models: {{{model}: {MODEL}}}\n"
        f"  endpoint: {{base_url: '{url}', timeout_s: 20}}\n"
    )
    return path


def start(tmp: Path, fakes: Fakes) -> dict[str, Any]:
    """The servers the cases run against, each said to serve."""
    pe, p1, p2, p3, p4, pf = (free_port() for _ in range(6))
    pf = free_run(3)
    engine = Proc(
        "engine",
        [
            "engine",
            "--server-type",
            "h100-80g-x1",
            "--model",
            MODEL,
            "--port",
            str(pe),
            "--time-scale",
            "0.2",
        ],
        tmp,
    )
    b1 = one_backend(tmp, "e1", MODEL, f"http://{HOST}:{pe}/v1")
    g1 = Proc("gateway", ["serve", "--backends", str(b1), "--port", str(p1)], tmp)
    text, ports = fault_backends(fakes)
    b2 = tmp / "faults.yaml"
    b2.write_text(text)
    g2 = Proc(
        "faults", ["serve", "--backends", str(b2), "--port", str(p2), "--scrape-s", "0.25"], tmp
    )
    ports["fk-slow"] = fakes.add("slow")
    b3 = one_backend(tmp, "fk-slow", "m-slow", f"http://{HOST}:{ports['fk-slow']}/v1")
    g3 = Proc(
        "overload", ["serve", "--backends", str(b3), "--port", str(p3), "--max-pending", "1"], tmp
    )
    b4 = tmp / "fleet.yaml"
    fleet = Proc(
        "fleet",
        [
            "fleet",
            "--cluster",
            "hetero-4",
            "--residency",
            "dynamic",
            "--time-scale",
            "0.02",
            "--port",
            str(pf),
            "--backends-out",
            str(b4),
        ],
        tmp,
    )
    for proc in (engine, g1, g2, g3):
        proc.wait_for("serving")
    fleet.wait_for("backends file written")
    g4 = Proc(
        "load", ["serve", "--backends", str(b4), "--port", str(p4), "--time-scale", "0.02"], tmp
    )
    g4.wait_for("serving")
    time.sleep(0.6)  # the fault gateway's first scrapes: the refused backends are masked
    return {
        "engine": Target("engine", pe, engine, False),
        "gateway": Target("gateway", p1, g1, True),
        "faults": Target("faults", p2, g2, True),
        "overload": Target("overload", p3, g3, True),
        "load": Target("load", p4, g4, True),
        "ports": ports,
        "b1": b1,
    }


def run_cases(r: Replay, tmp: Path, fakes: Fakes, s: dict[str, Any]) -> None:
    engine, g1, g2, g3, g4 = (s[k] for k in ("engine", "gateway", "faults", "overload", "load"))
    ports = s["ports"]
    for target in (g1, engine):
        request_fault_cases(r, target)
    for target in (g1, engine):
        for name, data, shut in malformed_cases():
            r.case(f"{target.name}/http/{name}", malformed_check(target, data, shut))
            if target.front:
                r.case(
                    f"{target.name}/http-after-call/{name}",
                    malformed_check(target, data, shut, after_call=True),
                )
    for target in (g1, engine):
        pipelined_cases(r, target)
    for case, _, stream, expect in UPSTREAM:
        r.case(f"faults/{case}", upstream_check(g2, case, stream, expect))
    for mode in RETRIED:
        for stream in (False, True):
            r.case(
                f"faults/retried-{mode}{'-stream' if stream else ''}", retry_check(g2, mode, stream)
            )
    for mode in ANSWERED:
        for stream in (False, True):
            r.case(
                f"faults/answered-{mode}{'-stream' if stream else ''}",
                retry_check(g2, f"ok-{mode}", stream),
            )
    r.case("faults/held-out-after-3", hold_check(g2))
    r.case("faults/metrics-500-masks", upstream_check(g2, "metrics500", False, "503"))
    r.case("faults/all-down-503", upstream_check(g2, "down", False, "503"))
    r.case("faults/all-down-503-stream", upstream_check(g2, "down", True, "503"))
    r.case(
        "faults/client-gone-fake",
        client_gone_check(g2, "m-slow-stream", "fk-slow-stream", fakes, ports["fk-slow-stream"]),
    )
    r.case("faults/client-leaves-stalled-stream", leave_stalled_check(g2))
    r.case("faults/outcomes-in-metrics", outcomes_check(g2, ports))
    r.case("gateway/client-gone", client_gone_check(g1, MODEL, "e1"))
    r.case("engine/client-gone", client_gone_check(engine, MODEL, None))
    r.case("overload/429", overload_check(g3))
    r.case("overload/client-leaves-front", leaver_check(g3, ()))
    r.case("overload/client-leaves-aiohttp", leaver_check(g3, ("Connection: close",)))
    r.case("lost/loadgen-vs-metrics", lost_check(tmp, g4))
    r.case("lost/fast-path-burst", burst_check(g4))
    loadgen_cases(r, tmp, g1, g3)
    for mode, why in (("stall-first", "TimeoutError"), ("break-mid", "failed")):
        url = f"http://{HOST}:{fakes.add(mode)}/v1"  # a server that answers /models only
        args = ["loadgen", "--url", url, *LOAD[:-2], "--timeout-s", "1"]
        r.case(f"loadgen/server-{mode}", one_line_exit(args, tmp, 1, why, within=15.0))
    backends_cases(r, tmp)
    port_cases(r, tmp, s["b1"])


def scan_logs(r: Replay) -> None:
    """After every server stopped: no traceback anywhere in their logs."""
    for proc in Proc.every:

        def check(proc: Proc = proc) -> None:
            text = proc.err() + proc.out_path.read_text(errors="replace")
            bad = [
                line
                for line in text.splitlines()
                if "Traceback" in line or line.startswith("  File ")
            ]
            if bad:
                raise TracebackSeen(f"{len(bad)} traceback lines, first {bad[0]!r}")
            if proc.p.returncode != 0:
                raise Wrong(f"exited {proc.p.returncode} when stopped")

        r.case(f"logs/{proc.name}", check)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="Run only cases whose name starts so (a,b).")
    args = ap.parse_args()
    only = tuple(p for p in args.only.split(",") if p)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        r = Replay(tmp, only)
        fakes = Fakes()
        try:
            run_cases(r, tmp, fakes, start(tmp, fakes))
        finally:
            for proc in Proc.every:
                proc.stop()
            fakes.stop()
        r.only = ()
        scan_logs(r)
    total = sum(r.counts.values())
    print(json.dumps({"cases": total, **r.counts, "seconds": round(time.monotonic() - t0)}))
    sys.exit(0 if r.counts["ok"] == total else 1)


if __name__ == "__main__":
    main()
