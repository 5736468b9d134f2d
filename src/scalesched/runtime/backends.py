"""LLM backends: an OpenAI-compatible HTTP client for real servers (vLLM, SGLang, any
server speaking ``/v1/chat/completions`` or ``/v1/completions``), configured per model.

Endpoints come from a YAML or JSON file mapping catalog model names to settings::

    llama-3.1-8b:
      base_url: http://{node_ip}:8000/v1   # {node_ip}: the IP of the node the task runs on
      served_model: meta-llama/Llama-3.1-8B-Instruct
      api: chat                              # or completions
      api_key_env: VLLM_API_KEY              # optional: read the key from this variable
      timeout_s: 600
      extra: {ignore_eos: true}              # merged into every request body

The request is made from the node the policy chose, so ``{node_ip}`` reaches the engine
co-located with it. The standard library's ``urllib`` does the HTTP: no new dependency.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalesched.errors import InputError, parse_json, parse_yaml


@dataclass(frozen=True)
class EndpointConfig:
    base_url: str
    served_model: str
    api: str = "chat"
    api_key_env: str | None = None
    timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


def load_endpoints(path: str | os.PathLike[str]) -> dict[str, EndpointConfig]:
    """Model name -> endpoint settings, from a YAML/JSON file (one line on bad input)."""
    from scalesched.cluster.perf import MODELS

    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "file", "endpoint file not found")
    try:
        text = p.read_text(encoding="utf-8")
    except (ValueError, OSError) as exc:
        raise InputError(str(p), "file", f"unreadable: {exc}") from None
    data = parse_json(text, str(p)) if p.suffix.lower() == ".json" else parse_yaml(text, str(p))
    if not isinstance(data, dict):
        raise InputError(str(p), "file", "expected a mapping of model name -> settings")
    out: dict[str, EndpointConfig] = {}
    for model, cfg in data.items():
        if model not in MODELS:
            raise InputError(str(p), str(model), f"unknown model; known: {', '.join(MODELS)}")
        if not isinstance(cfg, dict) or "base_url" not in cfg:
            raise InputError(str(p), f"{model}.base_url", "required")
        api = str(cfg.get("api", "chat"))
        if api not in ("chat", "completions"):
            raise InputError(str(p), f"{model}.api", "must be chat or completions")
        out[str(model)] = EndpointConfig(
            base_url=str(cfg["base_url"]),
            served_model=str(cfg.get("served_model", model)),
            api=api,
            api_key_env=cfg.get("api_key_env"),
            timeout_s=float(cfg.get("timeout_s", 600.0)),
            extra=dict(cfg.get("extra", {})),
        )
    return out


class LlmRequestError(RuntimeError):
    """The endpoint answered with an error or not at all."""


class OpenAIClient:
    """A blocking client for one model on one OpenAI-compatible endpoint."""

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
        req = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(req, timeout=cfg.timeout_s) as resp:
                data = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:200]
            raise LlmRequestError(f"{url}: HTTP {exc.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
            raise LlmRequestError(f"{url}: {exc}") from None
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"] if cfg.api == "chat" else choice["text"]
        except (KeyError, IndexError, TypeError):
            raise LlmRequestError(f"{url}: unexpected response {str(data)[:200]}") from None
        usage = data.get("usage") or {}
        return {
            "text": text,
            "prompt_tokens": int(usage.get("prompt_tokens", 0)),
            "completion_tokens": int(usage.get("completion_tokens", 0)),
        }


def synthetic_prompt(tokens: int) -> str:
    """A prompt of about ``tokens`` tokens for workloads that carry lengths, not text."""
    return " ".join(["data"] * max(1, tokens))
