"""LLM backends: an OpenAI-compatible HTTP client for real servers (vLLM, SGLang, any
server speaking ``/v1/chat/completions`` or ``/v1/completions``), configured per model.

Endpoints come from a YAML or JSON file mapping catalog model names to settings::

    llama-3.1-8b:
      base_url: http://{node_ip}:8000/v1   # {node_ip}: the IP of the node the task runs on
      served_model: meta-llama/Llama-3.1-8B-Instruct
      api: chat                              # or completions
      api_key_env: VLLM_API_KEY              # optional: read the key from this variable
      timeout_s: 600                         # total deadline of one call, retries included
      extra: {ignore_eos: true}              # merged into every request body

Each entry is checked against :class:`scalesched.cluster.endpoints.EndpointSettings` (the
schema the serving gateway shares): unknown keys, non-finite or non-positive timeouts and
unknown URL placeholders are one-line errors naming the file and the field, before any
connection is made. :func:`check_endpoints_cover` then checks that every model a workload
calls has an entry, so a missing one fails at the door and not mid-run on a Ray worker.

The request is made from the node the policy chose, so ``{node_ip}`` reaches the engine
co-located with it. The standard library's ``http.client`` does the HTTP (no new
dependency), under a *total* deadline: a timer closes the socket when ``timeout_s`` is
spent, so a server that drips one byte a second cannot stretch a call past it, whereas a
socket timeout alone restarts at every byte received.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalesched.errors import (
    InputError,
    parse_json,
    parse_yaml,
    read_user_text,
    short_repr,
)

MAX_ATTEMPTS = 3
"""Attempts of one call at most (the first and two retries), all within its deadline."""
BACKOFF_S = 0.5
"""Wait before the first retry; doubled before each further one (0.5 s, 1 s)."""
RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""HTTP statuses worth retrying: overloaded or restarting servers. Others are final."""
MAX_RESPONSE_BYTES = 64 << 20
"""Largest response body read (64 MiB): a completion is text, far smaller."""


@dataclass(frozen=True)
class EndpointConfig:
    """One model's endpoint as the runtime ships it to its workers (plain, picklable)."""

    base_url: str
    served_model: str
    api: str = "chat"
    api_key_env: str | None = None
    timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


def load_endpoints(path: str | os.PathLike[str]) -> dict[str, EndpointConfig]:
    """Model name -> endpoint settings, from a YAML/JSON file; every entry validated by
    ``EndpointSettings`` (one line naming the file and the field on bad input)."""
    from scalesched.cluster.perf import MODELS

    src = str(path)
    data = _read_mapping(Path(path))
    out: dict[str, EndpointConfig] = {}
    for model, cfg in data.items():
        if not isinstance(model, str) or model not in MODELS:
            known = ", ".join(MODELS)
            raise InputError(src, short_repr(model), f"unknown model; known: {known}")
        if not isinstance(cfg, dict):
            raise InputError(src, model, f"expected a mapping of settings, got {short_repr(cfg)}")
        settings = _validate_entry(cfg, src, model)
        out[model] = EndpointConfig(
            base_url=settings.base_url,
            served_model=settings.served_model or model,
            api=settings.api,
            api_key_env=settings.api_key_env,
            timeout_s=float(settings.timeout_s),
            extra=dict(settings.extra),
        )
    return out


def _read_mapping(p: Path) -> dict[Any, Any]:
    """The file's top-level mapping (YAML, or JSON for a ``.json`` file)."""
    src = str(p)
    text = read_user_text(p, what="endpoints file")
    data = parse_json(text, src) if p.suffix.lower() == ".json" else parse_yaml(text, src)
    if not isinstance(data, dict) or not data:
        raise InputError(src, "file", "expected a mapping of model name -> settings")
    return data


def _validate_entry(cfg: dict[Any, Any], src: str, model: str) -> Any:
    """``cfg`` as ``EndpointSettings``; the first problem as an InputError."""
    from pydantic import ValidationError

    from scalesched.cluster.endpoints import EndpointSettings

    try:
        return EndpointSettings.model_validate(cfg)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(part) for part in err["loc"]]
        key = loc[0] if loc else "(entry)"
        if err["type"] == "extra_forbidden":
            known = ", ".join(EndpointSettings.model_fields)
            raise InputError(src, f"{model}.{key}", f"unknown key; known: {known}") from None
        if err["type"] == "missing":
            raise InputError(src, f"{model}.{key}", "required") from None
        value = err.get("input")
        if key == "timeout_s" and isinstance(value, int | float) and not isinstance(value, bool):
            from scalesched.cluster.endpoints import MAX_TIMEOUT_S

            message = f"must be a finite number of seconds in (0, {MAX_TIMEOUT_S:g}]"
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
        raise InputError(src, f"{model}.{key}", f"{message} (got {short_repr(value)})") from None


def models_called(jobs: Iterable[Any]) -> set[str]:
    """The catalog models the LLM tasks of ``jobs`` call."""
    return {
        t.model
        for job in jobs
        for t in job.workflow.tasks
        if getattr(t, "kind", None) == "llm" and t.model
    }


def check_endpoints_cover(endpoints: Mapping[str, Any], models: Iterable[str], source: str) -> None:
    """Fail, naming the file and the first missing model, unless every model the workload
    calls has an endpoint: checked before Ray starts, not when a worker first needs it."""
    missing = sorted(set(models) - set(endpoints))
    if missing:
        have = ", ".join(sorted(endpoints)) or "none"
        raise InputError(
            source,
            missing[0],
            f"the workload calls this model but the file has no endpoint for it "
            f"(missing: {', '.join(missing)}; present: {have})",
        )


class LlmRequestError(RuntimeError):
    """The endpoint answered with an error or not at all."""


class _Retryable(LlmRequestError):
    """A failure another attempt may fix (refused or reset connection, 429/502/503/504)."""


class OpenAIClient:
    """A blocking client for one model on one OpenAI-compatible endpoint.

    One :meth:`complete` call ends within ``timeout_s`` in total: connecting, sending,
    waiting and reading, and every retry and backoff wait, share one deadline."""

    def __init__(self, config: EndpointConfig, node_ip: str = "127.0.0.1") -> None:
        self.config = config
        self.base_url = config.base_url.format(node_ip=node_ip).rstrip("/")

    @classmethod
    def from_config(cls, cfg: EndpointConfig | dict[str, Any], node_ip: str) -> OpenAIClient:
        if isinstance(cfg, dict):
            cfg = EndpointConfig(**cfg)
        return cls(cfg, node_ip=node_ip)

    def complete(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        """Send one request; returns ``{"text", "prompt_tokens", "completion_tokens"}``."""
        cfg = self.config
        body: dict[str, Any] = {"model": cfg.served_model, "max_tokens": int(max_tokens)}
        if cfg.api == "chat":
            url = f"{self.base_url}/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            url = f"{self.base_url}/completions"
            body["prompt"] = prompt
        body.update(cfg.extra)
        headers = {"Content-Type": "application/json"}
        if cfg.api_key_env:
            key = os.environ.get(cfg.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        raw = _post_with_retries(url, json.dumps(body).encode(), headers, cfg.timeout_s)
        try:
            data = json.loads(raw.decode())
            choice = data["choices"][0]
            text = choice["message"]["content"] if cfg.api == "chat" else choice["text"]
            usage = data.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise LlmRequestError(f"{url}: unexpected response {raw[:200]!r}") from None
        return {
            "text": text,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
        }


def _post_with_retries(url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> bytes:
    """POST with at most ``MAX_ATTEMPTS`` attempts and doubling waits, all before one
    deadline ``timeout_s`` from now; the last error when none succeeds."""
    deadline = time.monotonic() + timeout_s
    wait = BACKOFF_S
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            return post_before(url, body, headers, deadline)
        except _Retryable as exc:
            left = deadline - time.monotonic()
            if attempt == MAX_ATTEMPTS or left <= wait:
                raise LlmRequestError(f"{exc} (attempt {attempt} of {MAX_ATTEMPTS})") from None
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")  # pragma: no cover


def post_before(url: str, body: bytes, headers: dict[str, str], deadline: float) -> bytes:
    """One POST that ends by ``deadline`` (``time.monotonic()``) whatever the server does:
    a timer shuts the socket down at the deadline, which ends any read in progress."""
    parts = urllib.parse.urlsplit(url)
    left = deadline - time.monotonic()
    if left <= 0:
        raise LlmRequestError(f"{url}: deadline passed before the request")
    conn_cls = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    try:
        conn = conn_cls(parts.hostname or "", parts.port, timeout=left)
    except (ValueError, http.client.InvalidURL) as exc:
        raise LlmRequestError(f"{url}: bad URL: {exc}") from None
    expired = threading.Event()

    def cut() -> None:
        expired.set()
        sock = conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing left to cut
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(left, cut)
    timer.daemon = True
    timer.start()
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    try:
        conn.connect()
        if expired.is_set():  # the deadline fell while connecting, before the cut could act
            raise TimeoutError
        conn.request("POST", path or "/", body=body, headers=headers)
        resp = conn.getresponse()
        data = _read_body(resp, url, deadline, expired)
    except (ConnectionRefusedError, ConnectionResetError, http.client.RemoteDisconnected) as exc:
        if expired.is_set():
            raise LlmRequestError(f"{url}: no complete answer within the deadline") from None
        raise _Retryable(f"{url}: {exc}") from None
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set() or isinstance(exc, TimeoutError):
            raise LlmRequestError(f"{url}: no complete answer within the deadline") from None
        raise LlmRequestError(f"{url}: {exc}") from None
    finally:
        timer.cancel()
        conn.close()
    if resp.status >= 400:
        detail = data[:200].decode(errors="replace")
        cls = _Retryable if resp.status in RETRY_STATUSES else LlmRequestError
        raise cls(f"{url}: HTTP {resp.status}: {detail}")
    return data


def _read_body(
    resp: http.client.HTTPResponse, url: str, deadline: float, expired: threading.Event
) -> bytes:
    """The whole body, checking the deadline and the size cap after every chunk."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read1(65536)
        if expired.is_set() or time.monotonic() > deadline:
            raise TimeoutError
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise LlmRequestError(f"{url}: response larger than {MAX_RESPONSE_BYTES >> 20} MiB")
        chunks.append(chunk)


def synthetic_prompt(tokens: int) -> str:
    """A prompt of about ``tokens`` tokens for workloads that carry lengths, not text."""
    return " ".join(["data"] * max(1, tokens))
