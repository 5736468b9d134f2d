"""The HTTP side the emulated engine and the gateway share: their routes, their refusals,
their logs, and how they start listening.

Every answer a client gets from either server is an OpenAI error object when it is an
error, including the ones aiohttp would otherwise answer in plain text: an unknown route
(404), a wrong method (405), a body over :data:`MAX_BODY_BYTES` (413). Those are routes of
their own (a catch-all resource and an any-method route per path) rather than a
middleware, so a well-formed call pays nothing for them: aiohttp's router finds the exact
path first, and a middleware would add a coroutine to every call.

Logs are one line per event, never a traceback: a server log is read by an operator, who
needs what happened and to whom, not aiohttp's stack. :class:`OneLine` rewrites a record
that carries an exception into ``message: Type: text`` (with the raising line for an
unexpected exception). The servers' aiohttp loggers are :data:`http_log` (malformed HTTP:
over-long headers, control characters, a bad Content-Length, as aiohttp's parser answers
them) and ``scalesched.serve`` (the gateway's own events).

Listening: :func:`run_apps` binds every app before it reports the URLs, so a command says
"serving" only once it serves, and a port that cannot be bound (in use, not permitted, an
address not of this machine) is one :class:`~scalesched.errors.InputError` naming the
port, after whatever was already bound is closed again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import traceback
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from scalesched.errors import InputError, one_line
from scalesched.serve.fleet import base_url, url_host
from scalesched.serve.front import FrontSite
from scalesched.serve.loop import run as run_loop
from scalesched.serve.protocol import BadRequest, error_body, error_type

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

FRONT = web.AppKey("front", object)
"""An app's fast path for well-formed calls (:mod:`scalesched.serve.front`), if it has one:
its site then starts each connection there, aiohttp's handler behind it."""
LISTENING = web.AppKey("listening", list[Callable[[], None]])
"""Callbacks :func:`start_site` runs once the app's port is bound (the gateway's scrapes
start there: a port that cannot be bound is then the one line a command prints, with no
scrape's log line before it)."""

MAX_BODY_BYTES = 1 << 20
"""Largest request body either server reads (1 MiB, aiohttp's default, made explicit so the
documented figure is the code's): past it, 413. A prompt of 1 MiB is about 260k tokens by
the shared 4-characters rule, beyond every catalog model's context."""

MAX_LOGGED_CHARS = 300
"""A log line's quoted part (an exception's text, a path) is cut to this many characters:
a hostile header must not make one line a megabyte."""

log = logging.getLogger("scalesched.serve")
http_log = logging.getLogger("scalesched.serve.http")
"""The logger the servers' aiohttp request handlers write to (malformed HTTP, handler
errors aiohttp caught)."""


class OneLine(logging.Filter):
    """Turns a record with an exception into one line without the traceback: the
    message, the exception's type and text (control characters escaped, cut to
    :data:`MAX_LOGGED_CHARS`), and, unless it is an HTTP parser's or a connection's error
    (the client's doing), the file and line that raised it. One record is dropped: aiohttp
    re-raising, after the answer, a request body it cannot decode. One is raised to a
    warning: aiohttp logs at debug level a first request that is not HTTP at all (a
    garbage request line, a TLS handshake), which is a malformed request like any other;
    :data:`http_log` lets debug records through for it, the others are dropped here."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        if record.levelno < logging.WARNING and record.name == http_log.name:
            if not (info and isinstance(info[1], HttpProcessingError)):
                return False
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        if info and info[1] is not None:
            exc = info[1]
            if isinstance(exc, web.RequestPayloadError) and record.name == http_log.name:
                # aiohttp draining, after the answer, a body it cannot decode: a handler
                # that read it has logged its 400; one that did not never needed it
                return False
            text = f"{record.getMessage()}: {describe(exc)}"
            args = record.args if isinstance(record.args, tuple) else ()
            if isinstance(exc, HttpProcessingError) and len(args) == 1:
                # aiohttp's "Error handling request from %s": said as the refusals say it
                text = f"{exc.code} malformed HTTP request from {args[0]}: {_cut(exc.message)}"
            elif not isinstance(exc, HttpProcessingError | ConnectionError):
                frames = traceback.extract_tb(exc.__traceback__)
                if frames:
                    text += f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})"
            record.msg, record.args = text, None
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, on one line and cut short."""
    text = _cut(str(exc))
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _cut(text: str) -> str:
    """``text`` on one line (runs of white space as one space, control characters
    escaped), cut to :data:`MAX_LOGGED_CHARS`."""
    text = one_line(" ".join(text.split()))
    return text if len(text) <= MAX_LOGGED_CHARS else text[: MAX_LOGGED_CHARS - 3] + "..."


_ONE_LINE = OneLine()
for _logger in (log, http_log):
    if _ONE_LINE not in _logger.filters:
        _logger.addFilter(_ONE_LINE)
http_log.setLevel(logging.DEBUG)  # for the one debug record OneLine keeps (a non-HTTP request)


def configure_logging() -> None:
    """The serving commands' logging: warnings and errors on stderr, one line each, with a
    time stamp; every record through :class:`OneLine`, whichever library logged it (the
    filter sits on the handler, so records of aiohttp's and asyncio's loggers get it)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    for handler in logging.getLogger().handlers:
        if _ONE_LINE not in handler.filters:
            handler.addFilter(_ONE_LINE)


def _where(request: web.BaseRequest) -> str:
    path = request.raw_path
    if len(path) > 120:
        path = path[:117] + "..."
    return one_line(f"{request.method} {path} from {request.remote or '?'}")


def refusal(
    request: web.BaseRequest,
    message: str,
    status: int,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An OpenAI error response, logged as one line (a refusal is a client's mistake or a
    fault the operator should see; 429 is not logged: under overload it would flood the
    log, and ``/metrics`` counts it)."""
    if status != 429:
        log.warning("%d %s: %s", status, _where(request), _cut(message))  # a 1 MiB model name too
    return error_response(message, status, param=param, code=code, headers=headers)


def error_response(
    message: str,
    status: int,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    """An OpenAI error object (``{"error": {message, type, param, code}}``) with ``status``."""
    body = error_body(message, error_type(status), param=param, code=code)
    return web.json_response(body, status=status, headers=headers)


def bad_request(request: web.BaseRequest, exc: BadRequest) -> web.Response:
    """The refusal of a :class:`BadRequest`."""
    return refusal(request, str(exc), exc.status, param=exc.param, code=exc.code)


def failure(request: web.BaseRequest, exc: Exception) -> web.Response:
    """A handler's unexpected exception: one log line (where it was raised included) and a
    500 OpenAI error, instead of aiohttp's plain-text 500 and a traceback."""
    log.error("500 %s: internal error", _where(request), exc_info=exc)
    return error_response("internal error in the server; see its log", 500, code="internal_error")


async def read_json(request: web.Request) -> tuple[bytes, Any]:
    """A request's body bytes and their JSON, or a :class:`BadRequest`: larger than
    :data:`MAX_BODY_BYTES` (413), cut short by the client, not decodable (a bad
    ``Content-Encoding``), not JSON, or nested too deeply to read (Python's parser
    recurses: a 200k-deep array is a RecursionError)."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise BadRequest(
            f"the request body is larger than {MAX_BODY_BYTES >> 20} MiB", status=413
        ) from None
    except (ConnectionError, RuntimeError):  # aiohttp's RuntimeError("Connection closed."):
        # the client closed before its body came, and before the handler began reading it
        raise BadRequest("the request body was cut short (the connection closed)") from None
    except (HttpProcessingError, web.RequestPayloadError) as exc:
        why = _STATUS_PREFIX.sub("", str(exc))
        raise BadRequest(f"the request body cannot be read: {_cut(why)}") from None
    coding = request.headers.get("Content-Encoding")
    if coding is not None:
        raw = _decode(raw, coding)
    try:
        return raw, json.loads(raw)
    except RecursionError:
        raise BadRequest("the request body is nested too deeply to read") from None
    except ValueError:  # also UnicodeDecodeError, and integers past 4300 digits
        raise BadRequest("the request body is not valid JSON") from None


_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
"""The body codings the servers read (zlib's window bits of each)."""


def _decode(raw: bytes, coding: str) -> bytes:
    """A body decoded from its ``Content-Encoding`` (gzip or deflate; identity as it is),
    at most :data:`MAX_BODY_BYTES` of it, or a :class:`BadRequest`. The servers decode
    bodies here rather than in aiohttp's parser (``auto_decompress=False``): the parser
    finds a deflate body that does not end only at the message's end, outside any handler,
    and answers it in plain text; here every coding fault is an OpenAI error."""
    name = coding.strip().lower()
    if name in ("", "identity"):
        return raw
    wbits = _WBITS.get(name)
    if wbits is None:
        raise BadRequest(
            f"the Content-Encoding {_cut(coding)!r} is not supported (gzip, deflate or none)"
        )
    if name == "deflate" and raw and raw[0] & 0x0F != 8:
        wbits = -zlib.MAX_WBITS  # deflate without zlib's header, as clients also send it
    decoder = zlib.decompressobj(wbits)
    try:
        data = decoder.decompress(raw, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise BadRequest(f"the request body is not {name} data: {_cut(str(exc))}") from None
    if len(data) > MAX_BODY_BYTES:
        raise BadRequest(
            f"the request body is larger than {MAX_BODY_BYTES >> 20} MiB once decoded", status=413
        )
    if not decoder.eof:
        raise BadRequest(f"the request body is not whole {name} data (it ends too early)")
    return data


_STATUS_PREFIX = re.compile(r"^\d+, message:\s*")
"""What aiohttp's parser errors put before their message (``400, message: ...``)."""


def add_openai_routes(
    app: web.Application,
    *,
    chat: Handler,
    completions: Handler,
    models: Handler,
    health: Handler,
    metrics: Handler,
) -> None:
    """The routes every OpenAI-compatible server here answers (the emulated engine and the
    gateway): both completion endpoints, the model list, health and Prometheus metrics;
    any other method on those paths is a 405 and any other path a 404, each an OpenAI
    error object."""
    routes: Sequence[tuple[str, str, Handler]] = (
        ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/completions", completions),
        ("GET", "/v1/models", models),
        ("GET", "/health", health),
        ("GET", "/metrics", metrics),
    )
    for method, path, handler in routes:
        if method == "POST":
            app.router.add_post(path, handler)
        else:
            app.router.add_get(path, handler)  # and HEAD
        allowed = "POST" if method == "POST" else "GET, HEAD"
        app.router.add_route("*", path, _wrong_method(allowed))
    app.router.add_route("*", r"/{path:[\s\S]*}", _not_found)  # "." would miss a %0A


def _wrong_method(allowed: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return refusal(
            request,
            f"{request.method} is not allowed on {request.path}; use {allowed}",
            405,
            code="method_not_allowed",
            headers={"Allow": allowed},
        )

    return handler


async def _not_found(request: web.Request) -> web.StreamResponse:
    return refusal(
        request,
        "no such route; the API is under /v1 (/v1/chat/completions, /v1/completions, "
        "/v1/models), plus /health and /metrics",
        404,
        code="not_found",
    )


def new_app() -> web.Application:
    """An aiohttp application with the servers' body limit."""
    return web.Application(client_max_size=MAX_BODY_BYTES)


# -- listening -----------------------------------------------------------------------------


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on host:port (port 0: an ephemeral one); returns the runner (its
    ``cleanup`` stops it) and the bound port. A port that cannot be bound is an
    InputError naming ``--port`` and the address (the runner is cleaned up first)."""
    # Bodies are decoded by read_json (_decode), not by aiohttp's parser: see _decode.
    runner = web.AppRunner(app, access_log=None, logger=http_log, auto_decompress=False)
    await runner.setup()
    quick = app.get(FRONT)
    site = (
        web.TCPSite(runner, host, port)
        if quick is None
        else FrontSite(runner, host, port, quick, MAX_BODY_BYTES)  # type: ignore[arg-type]
    )
    try:
        await site.start()
    except OSError as exc:  # in use, not permitted, or not an address of this machine
        await runner.cleanup()
        option = "--host" if isinstance(exc, socket.gaierror) else "--port"
        # asyncio rewrites strerror into a sentence with the address; errno says it plainly
        why = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror
        message = f"cannot listen on {url_host(host)}:{port}: {(why or describe(exc)).lower()}"
        raise InputError(option, option.lstrip("-"), message) from None
    for listening in app.get(LISTENING, ()):
        listening()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    return runner, int(sockets[0].getsockname()[1]) if sockets else port


async def serve_apps(
    apps: Sequence[web.Application],
    host: str,
    port: int,
    ready: Callable[[list[str]], None] | None = None,
    *,
    stop_on_sigterm: bool = False,
) -> None:
    """Serve ``apps`` on consecutive ports from ``port`` (0: each an ephemeral one) until
    cancelled (or, with ``stop_on_sigterm``, sent SIGTERM); ``ready`` is called with the
    base URLs once every app listens. If one cannot bind, those already bound are closed
    before the error propagates: nothing is left half started."""
    runners = []
    stop = asyncio.Event()
    if stop_on_sigterm:  # before "ready": a SIGTERM right after it must find the handler
        with contextlib.suppress(NotImplementedError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        urls = []
        for i, app in enumerate(apps):
            runner, bound = await start_site(app, host, port + i if port else 0)
            runners.append(runner)
            urls.append(base_url(host, bound))
        if ready is not None:
            ready(urls)
        await stop.wait()
    finally:
        for runner in runners:
            await runner.cleanup()


def run_apps(
    apps: Sequence[web.Application],
    host: str,
    port: int,
    ready: Callable[[list[str]], None] | None = None,
    *,
    stop_on_sigterm: bool = False,
) -> None:
    """Blocking :func:`serve_apps` (one process, one port each) until interrupted."""
    with contextlib.suppress(KeyboardInterrupt):
        run_loop(serve_apps(apps, host, port, ready, stop_on_sigterm=stop_on_sigterm))
