"""The OpenAI wire format as the engine, the gateway and the load generator share it: how a
prompt is counted in tokens, what a request body must hold, and the error shape.

Tokens are counted as 4 characters each (the usual rule of thumb for English BPE
vocabularies): the emulated engine, the gateway's estimates and the load generator's
prompts all use this one rule, so a prompt the load generator sizes at N tokens is N tokens
everywhere. A real engine tokenizes for itself; the gateway only estimates.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 4
DEFAULT_MAX_TOKENS = 64
"""Output tokens of a request that names no ``max_tokens`` (vLLM would fill the context)."""
MAX_OUTPUT_TOKENS = 1 << 20

PRIORITY_FIELD = "priority"
"""The request field of an admission priority, as vLLM and SGLang name it: an integer, lower
values admitted first (SGLang: when run with its flag for low values first)."""
PRIORITY_UNITS_PER_S = 1000
"""Integer units per unit of a policy's priority. The ordering policies' priorities are
model seconds (attained service, remaining work, arrival time), so a backend gets
milliseconds: ``round`` keeps the order (never inverts two values) and keeps ties (equal
values give equal integers); only values less than half a millisecond apart may tie."""
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
"""The priority bounds vLLM's request schema enforces."""
NO_PRIORITY = math.inf
"""The priority of a request that names none: behind every prioritized one, in arrival
order (the simulator's rule for a ``Place`` without a priority)."""


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under the shared 4-characters rule (at least one)."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def prompt_of_tokens(tokens: int) -> str:
    """A prompt that counts as ``tokens`` tokens."""
    return "tok " * max(1, tokens)


class BadRequest(ValueError):
    """A request the server refuses with an OpenAI-shaped 4xx."""

    def __init__(
        self, message: str, *, status: int = 400, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


def error_body(
    message: str, kind: str, *, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An OpenAI error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_type(status: int) -> str:
    """OpenAI's error ``type`` for an HTTP status."""
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def sse(payload: dict[str, Any] | str) -> bytes:
    """One server-sent event (``data: ...`` and a blank line)."""
    text = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


@dataclass(frozen=True, slots=True)
class CompletionRequest:
    """What the engine and the gateway read off a request body."""

    model: str
    chat: bool
    stream: bool
    prompt_tokens: int
    max_tokens: int
    include_usage: bool
    prefix_text: str
    """The first message (a system prompt) or the prompt's first 256 characters: what a
    prefix-matching router keys an application prompt by."""
    priority: float = NO_PRIORITY
    """The body's ``priority`` (an admission-order key, lower first), or NO_PRIORITY."""


def wire_priority(priority: float | None) -> int | None:
    """The integer ``priority`` a backend gets for a policy's ``Place.priority``:
    ``round(priority * PRIORITY_UNITS_PER_S)``, clamped to int64. None for no priority
    (None, or infinite: the executors' "arrival order"; NaN orders nothing either)."""
    if priority is None or not math.isfinite(priority):
        return None
    scaled = priority * PRIORITY_UNITS_PER_S
    if not math.isfinite(scaled):  # a finite value too large to scale
        return INT64_MAX if scaled > 0 else INT64_MIN
    return max(INT64_MIN, min(INT64_MAX, round(scaled)))


def parse_request(body: Any, chat: bool) -> CompletionRequest:
    """Validate a ``/v1/chat/completions`` (``chat``) or ``/v1/completions`` body."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required and must be a string", param="model")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must be a non-empty list", param="messages")
        texts = [_message_text(m, i) for i, m in enumerate(messages)]
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, str):
            texts = [prompt]
        elif isinstance(prompt, list) and prompt and all(isinstance(p, str) for p in prompt):
            texts = list(prompt)
        else:
            raise BadRequest("'prompt' must be a string or a list of strings", param="prompt")
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is None:
        limit = DEFAULT_MAX_TOKENS
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_OUTPUT_TOKENS:
        raise BadRequest(
            f"'max_tokens' must be an integer in 1..{MAX_OUTPUT_TOKENS}", param="max_tokens"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be a boolean", param="stream")
    options = body.get("stream_options") or {}
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    return CompletionRequest(
        model=model,
        chat=chat,
        stream=stream,
        prompt_tokens=sum(count_tokens(t) for t in texts),
        max_tokens=limit,
        include_usage=include_usage,
        prefix_text=texts[0][:256],
        priority=_priority(body.get(PRIORITY_FIELD)),
    )


def _priority(value: Any) -> float:
    """A body's ``priority``: an integer in vLLM's bounds (int64; a whole float such as 3.0
    counts, as vLLM's schema takes it), or absent/null. Anything else is refused as the
    engines refuse it."""
    if value is None:
        return NO_PRIORITY
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not INT64_MIN <= value <= INT64_MAX:
        raise BadRequest("'priority' must be a 64-bit integer", param=PRIORITY_FIELD)
    return value  # kept an int: a float would merge neighbours beyond 2**53


def _message_text(message: Any, i: int) -> str:
    """A message's text: its ``content`` string, or its text parts joined (other parts,
    images or audio, add no text). Anything else is a BadRequest naming the field."""
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise BadRequest(f"messages[{i}] must be an object with a 'role'", param=f"messages[{i}]")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):  # content parts: the text ones count
        texts = []
        for j, part in enumerate(content):
            where = f"messages[{i}].content[{j}]"
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise BadRequest(f"{where} must be an object with a 'type'", param=where)
            if part["type"] == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise BadRequest(f"{where}.text must be a string", param=f"{where}.text")
                texts.append(text)
        return "".join(texts)
    raise BadRequest(
        f"messages[{i}].content must be a string or a list", param=f"messages[{i}].content"
    )


ROLE_HEADER = "x-task-role"
PATTERN_HEADER = "x-task-pattern"
OUTPUT_EST_HEADER = "x-task-output-est"
HINT_HEADER = "x-task-hint"


@dataclass(frozen=True, slots=True)
class TaskSignals:
    """What an agent framework may tell the gateway about a call beyond its body: the
    observable signals a scheduler sees in the simulator (``TaskRequest``'s role, pattern,
    output-length estimate and difficulty hint), so that a policy that reads them (``tail``
    and its predictor) decides on the same information live as simulated."""

    role: str | None = None
    pattern: str = ""
    output_est: int | None = None
    """None: the gateway estimates the output as ``max_tokens``."""
    hint: float = 0.0


NO_SIGNALS = TaskSignals()


def task_signals(headers: Any) -> TaskSignals:
    """The ``x-task-*`` headers of a request (a mapping); a malformed number is a
    :class:`BadRequest` naming its header."""
    role, pattern = headers.get(ROLE_HEADER), headers.get(PATTERN_HEADER)
    est, hint = headers.get(OUTPUT_EST_HEADER), headers.get(HINT_HEADER)
    if role is None and pattern is None and est is None and hint is None:
        return NO_SIGNALS
    output_est = None
    if est is not None:
        try:
            output_est = int(est)
        except ValueError:
            output_est = 0
        if not 1 <= output_est <= MAX_OUTPUT_TOKENS:
            raise BadRequest(
                f"{OUTPUT_EST_HEADER} must be an integer in 1..{MAX_OUTPUT_TOKENS}",
                param=OUTPUT_EST_HEADER,
            )
    value = 0.0
    if hint is not None:
        try:
            value = float(hint)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise BadRequest(f"{HINT_HEADER} must be a finite number", param=HINT_HEADER)
    return TaskSignals(role or None, pattern or "", output_est, value)
