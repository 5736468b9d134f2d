"""How to reach one OpenAI-compatible endpoint: the settings shared by the Ray runtime's
endpoints file (``--llm http --endpoints FILE``, one entry per catalog model) and the
serving gateway's backends file (one entry per engine).

Plain data, validated with pydantic (unknown keys refused, numbers finite and ranged), so
that a typo or an absurd timeout is one clear error before any connection is made.
"""

from __future__ import annotations

import json
import re
import string
import sys
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from scalesched.cluster.catalog import SERVER_TYPES, can_host
from scalesched.cluster.perf import MODELS
from scalesched.errors import InputError, parse_yaml, read_user_text

MAX_TIMEOUT_S = 86_400.0
"""Longest total deadline one request may be given (a day): past it a stuck call is a bug."""

URL_PLACEHOLDERS = frozenset({"node_ip"})
"""Placeholders a ``base_url`` may carry: ``{node_ip}``, the node the task runs on."""

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_Timeout = Annotated[StrictFloat | StrictInt, Field(gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)]


class EndpointSettings(BaseModel):
    """One OpenAI-compatible endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(
        description="Base URL up to /v1, e.g. http://127.0.0.1:8000/v1; may contain "
        "{node_ip} (the node a task runs on)."
    )
    served_model: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="The model name the endpoint serves (default: the catalog name)."
    )
    api: Literal["chat", "completions"] = Field(
        "chat", description="chat (/chat/completions) or completions (/completions)."
    )
    api_key_env: Annotated[str, Field(pattern=_ENV_NAME)] | None = Field(
        None, description="Environment variable holding the API key, sent as a bearer token."
    )
    timeout_s: _Timeout = Field(
        600.0, description="Total deadline of one request, seconds (0 < t <= 86400)."
    )
    extra: dict[str, Any] = Field(
        default_factory=dict, description="Fields merged into every request body."
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not re.match(r"^https?://[^\s/]+", value):
            raise ValueError("must start with http:// or https:// and name a host")
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name}
        except ValueError as exc:
            raise ValueError(f"bad placeholder: {exc}") from None
        unknown = names - URL_PLACEHOLDERS
        if unknown:
            known = ", ".join(f"{{{n}}}" for n in sorted(URL_PLACEHOLDERS))
            raise ValueError(f"unknown placeholder {{{sorted(unknown)[0]}}}; known: {known}")
        address = value
        for name in URL_PLACEHOLDERS:  # not str.format: "{}" or "{0}" must not raise here
            address = address.replace(f"{{{name}}}", "host")
        problem = url_problem(address)
        if problem:
            raise ValueError(problem)
        return value


def url_problem(url: str) -> str | None:
    """What is wrong with an http(s) URL's address, or None: a host that does not parse
    (``http://[::1/v1``), a port that is not a number or not in 1..65535 (0 would be
    "any port" to a server, never where one listens). The one check of an address the
    runtime's endpoints file, the gateway's backends file and the serving commands share,
    so a bad one is refused before anything listens or connects."""
    try:
        netloc = urlsplit(url).netloc
    except ValueError as exc:  # e.g. an IPv6 literal without its closing bracket
        return f"not a valid URL: {exc}"
    host, port = _HOST_PORT.fullmatch(netloc).groups()  # type: ignore[union-attr]
    if not host.strip("[]"):
        return "names no host"
    if port is None:
        return None
    if not port.isdigit() or not port.isascii():
        return f"the port {port!r} is not a number in 1..{MAX_PORT}"
    return port_problem(int(port))


_HOST_PORT = re.compile(r"(?:.*@)?(\[[^\]]*\]|[^:]*)(?::(.*))?", re.DOTALL)
"""A URL's netloc: optional user info, the host (an IPv6 literal in brackets), the port."""


def port_problem(port: int, count: int = 1) -> str | None:
    """Why ``port`` (and the ``count - 1`` after it) cannot be listened on or connected
    to, or None: each must be in 1..65535."""
    last = port + count - 1
    if not 1 <= port <= MAX_PORT:
        return f"port {port} is not in 1..{MAX_PORT}"
    if last > MAX_PORT:
        return f"ports {port}..{last} ({count} of them) go past {MAX_PORT}"
    return None


MAX_PORT = 65535


# -- the serving gateway's backends file ------------------------------------------------

_BACKEND_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"

DEFAULT_IDLE_TIMEOUT_S = 60.0
"""A streamed call's default idle timeout: long enough for an engine's queue and prefill
before a first token under load, short enough that a stalled engine does not hold calls
for the whole ``timeout_s`` (600 s by default)."""


class BackendEndpoint(EndpointSettings):
    """A backend's endpoint: the shared settings plus what only the gateway reads."""

    idle_timeout_s: _Timeout | None = Field(
        DEFAULT_IDLE_TIMEOUT_S,
        description="Seconds a streamed call may wait for the backend's next bytes "
        "(its headers and first token included) before the call fails as stalled: "
        "retried on another backend if nothing was passed on yet, else ended with an "
        "error event. A long generation that keeps streaming is not cut; timeout_s "
        "bounds the whole call. Non-streamed calls have only timeout_s (an engine sends "
        "nothing until it is done). null: no idle timeout. (0 < t <= 86400)",
    )


class BackendEntry(BaseModel):
    """One engine behind the gateway: where it is (``endpoint``), what it serves and on
    which catalog server type, so the cost model can estimate its times."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(pattern=_BACKEND_NAME)] = Field(
        description="Unique name of the backend (its label in the gateway's /metrics)."
    )
    endpoint: BackendEndpoint = Field(
        description="How to reach it (base_url up to /v1, api_key_env, timeout_s, "
        "idle_timeout_s, extra); served_model is not used here: ``models`` names what the "
        "backend serves."
    )
    models: dict[Annotated[str, Field(min_length=1)], str] = Field(
        min_length=1,
        description="Served model name (what clients send as `model`) -> catalog model "
        "name (the cost model's), e.g. {meta-llama/Llama-2-7b-chat-hf: llama-2-7b}.",
    )
    server_type: str = Field(description="Catalog server type the engine runs on.")

    @field_validator("server_type")
    @classmethod
    def _server_type(cls, value: str) -> str:
        if value not in SERVER_TYPES:
            raise ValueError(f"unknown server type {value!r}; known: {', '.join(SERVER_TYPES)}")
        if SERVER_TYPES[value].gpu_type is None:
            raise ValueError(f"{value} has no GPUs: it cannot run an LLM engine")
        return value

    @field_validator("endpoint", mode="before")
    @classmethod
    def _widen(cls, value: Any) -> Any:
        """Shared ``EndpointSettings`` (e.g. built in code) are taken as a backend's, with
        the default idle timeout."""
        if isinstance(value, EndpointSettings) and not isinstance(value, BackendEndpoint):
            return value.model_dump(exclude_unset=True)
        return value

    @field_validator("endpoint")
    @classmethod
    def _no_served_model(cls, value: BackendEndpoint) -> BackendEndpoint:
        if value.served_model is not None:
            raise ValueError("served_model is not used in a backends file: list them in models")
        if "{" in value.base_url:
            raise ValueError("a backend's base_url cannot hold placeholders")
        return value


class BackendsFile(BaseModel):
    """The gateway's backends file: the engines it routes to."""

    model_config = ConfigDict(extra="forbid")

    backends: list[BackendEntry] = Field(min_length=1, description="The engines, in order.")


def backends_file_schema() -> dict[str, Any]:
    """JSON schema of the backends file (docs/backends-schema.json)."""
    return BackendsFile.model_json_schema()


def backends_schema_json() -> str:
    """The committed text of docs/backends-schema.json (regenerate:
    ``python -m scalesched.cluster.endpoints > docs/backends-schema.json``)."""
    return json.dumps(backends_file_schema(), indent=2) + "\n"


def backends_from_dict(data: Any, source: str) -> list[BackendEntry]:
    """Validate the parsed content of a backends file: every model a catalog model that fits
    its backend's server type, names and URLs unique; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise InputError(source, "(file)", "expected a mapping with a list of backends")
    try:
        parsed = BackendsFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise InputError(source, where.lstrip(".") or "(file)", first["msg"]) from None
    names: set[str] = set()
    urls: set[str] = set()
    for i, backend in enumerate(parsed.backends):
        if backend.name in names:
            raise InputError(source, f"backends[{i}].name", f"{backend.name!r} appears twice")
        if backend.endpoint.base_url.rstrip("/") in urls:
            raise InputError(source, f"backends[{i}].endpoint.base_url", "appears twice")
        names.add(backend.name)
        urls.add(backend.endpoint.base_url.rstrip("/"))
        server = SERVER_TYPES[backend.server_type].instance(0)
        for served, catalog in backend.models.items():
            field = f"backends[{i}].models.{served}"
            if catalog not in MODELS:
                known = ", ".join(sorted(MODELS))
                message = f"unknown catalog model {catalog!r}; known: {known}"
                raise InputError(source, field, message)
            if not can_host(server, catalog):
                raise InputError(source, field, f"{catalog} does not fit on {backend.server_type}")
    return parsed.backends


def load_backends_file(path: str) -> list[BackendEntry]:
    """Read and validate a YAML backends file."""
    text = read_user_text(path, field="(file)", what="backends file")
    return backends_from_dict(parse_yaml(text, path), path)


if __name__ == "__main__":
    sys.stdout.write(backends_schema_json())
