"""How to reach one OpenAI-compatible endpoint: the settings shared by the Ray runtime's
endpoints file (``--llm http --endpoints FILE``, one entry per catalog model) and the
serving gateway's backends file (one entry per engine).

Plain data, validated with pydantic (unknown keys refused, numbers finite and ranged), so
that a typo or an absurd timeout is one clear error before any connection is made.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

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
        return value
