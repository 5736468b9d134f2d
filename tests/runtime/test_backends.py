"""The endpoints file (validated by ``EndpointSettings``, every model the workload calls
present before Ray starts) and the HTTP client's total deadline and bounded retries,
against servers on 127.0.0.1 whose loops stop by themselves."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.errors import InputError
from scalesched.runtime import backends
from scalesched.runtime.backends import (
    EndpointConfig,
    LlmRequestError,
    OpenAIClient,
    check_endpoints_cover,
    load_endpoints,
)

GOOD = "llama-2-7b:\n  base_url: http://{node_ip}:8000/v1\n  timeout_s: 30\n"


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        ("  base_url: http://h/v1\n  timeot_s: 5\n", "llama-2-7b.timeot_s", "unknown key"),
        ("  base_url: http://h/v1\n  timeout_s: .nan\n", "llama-2-7b.timeout_s", "finite"),
        ("  base_url: http://h/v1\n  timeout_s: .inf\n", "llama-2-7b.timeout_s", "finite"),
        ("  base_url: http://h/v1\n  timeout_s: -1\n", "llama-2-7b.timeout_s", "finite"),
        ("  base_url: http://h/v1\n  timeout_s: 0\n", "llama-2-7b.timeout_s", "finite"),
        ("  base_url: http://h/v1\n  timeout_s: 1e3\n", "llama-2-7b.timeout_s", "number"),
        ("  base_url: 8000\n", "llama-2-7b.base_url", "string"),
        ("  base_url: http://{host}:8000/v1\n", "llama-2-7b.base_url", "{host}"),
        ("  base_url: http://h/v1\n  api_key_env: [A, B]\n", "llama-2-7b.api_key_env", "string"),
        ("  base_url: http://h/v1\n  api: grpc\n", "llama-2-7b.api", "chat"),
        ("  api: chat\n", "llama-2-7b.base_url", "required"),
        ("  [http://h/v1]\n", "llama-2-7b", "mapping"),
    ],
)
def test_each_bad_entry_is_one_line_naming_the_file_and_field(
    tmp_path: Path, entry: str, field: str, words: str
) -> None:
    path = tmp_path / "ep.yaml"
    path.write_text("llama-2-7b:\n" + entry)
    with pytest.raises(InputError) as info:
        load_endpoints(path)
    message = str(info.value)
    assert str(path) in message and field in message and words in message, message
    assert "\n" not in message


def test_a_good_file_loads_with_defaults_filled(tmp_path: Path) -> None:
    path = tmp_path / "ep.json"
    path.write_text(json.dumps({"phi-2": {"base_url": "http://127.0.0.1:1/v1"}}))
    cfg = load_endpoints(path)["phi-2"]
    assert cfg.served_model == "phi-2" and cfg.api == "chat" and cfg.timeout_s == 600.0
    path.write_text('{"phi-2": {"base_url": "http://h/v1", "timeout_s": NaN}}')
    with pytest.raises(InputError, match="NaN"):
        load_endpoints(path)


def test_every_model_the_workload_calls_must_have_an_endpoint() -> None:
    endpoints = {"phi-2": EndpointConfig("http://h/v1", "phi-2")}
    check_endpoints_cover(endpoints, {"phi-2"}, "ep.yaml")
    with pytest.raises(InputError, match=r"ep\.yaml: llama-2-7b: .*missing: llama-2-7b"):
        check_endpoints_cover(endpoints, {"phi-2", "llama-2-7b"}, "ep.yaml")


def test_run_checks_the_endpoints_file_before_ray_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("ray")
    import ray

    from scalesched.runtime import cluster as runtime_cluster

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("Ray was started before the endpoints were checked")

    monkeypatch.setattr(runtime_cluster, "local_cluster", started)
    monkeypatch.setattr(ray, "init", started)
    path = tmp_path / "ep.yaml"
    path.write_text(GOOD)  # only llama-2-7b: agentic-mix calls more models
    runner = CliRunner()
    base = ["run", "--workflows", "3", "--rate", "1", "--cluster", "hetero-4", "--llm", "http"]
    for where in (["--local"], ["--address", "127.0.0.1:1"]):
        result = runner.invoke(app, [*base, *where, "--endpoints", str(path)])
        assert result.exit_code == 2, result.output
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and "no endpoint" in lines[0], lines
    path.write_text(GOOD.replace("timeout_s", "timeot_s"))
    result = runner.invoke(app, [*base, "--local", "--endpoints", str(path)])
    assert result.exit_code == 2 and "llama-2-7b.timeot_s: unknown key" in result.stderr


class _Script(BaseHTTPRequestHandler):
    """Answers by ``mode``: drip (one body byte per 0.2 s, at most 40), drip-head (the
    status line a byte at a time), flaky (503 until the ``ok_after``-th request), ok."""

    mode = "ok"
    ok_after = 0
    seen = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen += 1
        reply = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
        try:
            if self.mode == "drip":
                self.send_response(200)
                self.send_header("Content-Length", "40")
                self.end_headers()
                for _ in range(40):  # bounded: 8 s at most
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            elif self.mode == "drip-head":
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 24:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            else:
                failing = self.mode == "flaky" and type(self).seen <= self.ok_after
                self.send_response(503 if failing else 400 if self.mode == "bad" else 200)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
        except (BrokenPipeError, ConnectionResetError):
            return  # the client gave up, as it should

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Script)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Script.seen = 0
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("mode", ["drip", "drip-head"])
def test_a_slow_drip_cannot_outlast_the_total_deadline(
    server: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_Script, "mode", mode)
    client = OpenAIClient(EndpointConfig(server, "m", timeout_s=1.0))
    start = time.monotonic()
    with pytest.raises(LlmRequestError, match="deadline"):
        client.complete("x", 1)
    assert time.monotonic() - start < 1.6  # a per-read timeout would wait 8 s


def test_retries_are_bounded_and_back_off(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "BACKOFF_S", 0.05)
    monkeypatch.setattr(_Script, "mode", "flaky")
    monkeypatch.setattr(_Script, "ok_after", 2)
    client = OpenAIClient(EndpointConfig(server, "m", timeout_s=5.0))
    assert client.complete("x", 1)["text"] == "hi" and _Script.seen == 3
    _Script.seen = 0
    monkeypatch.setattr(_Script, "ok_after", 99)
    start = time.monotonic()
    with pytest.raises(LlmRequestError, match="HTTP 503.*attempt 3 of 3"):
        client.complete("x", 1)
    assert _Script.seen == backends.MAX_ATTEMPTS and time.monotonic() - start >= 0.15
    _Script.seen = 0
    monkeypatch.setattr(_Script, "mode", "bad")
    with pytest.raises(LlmRequestError, match="HTTP 400"):
        client.complete("x", 1)
    assert _Script.seen == 1  # a client error is final


def test_retries_never_pass_the_deadline(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backends, "BACKOFF_S", 5.0)
    monkeypatch.setattr(_Script, "mode", "flaky")
    monkeypatch.setattr(_Script, "ok_after", 99)
    client = OpenAIClient(EndpointConfig(server, "m", timeout_s=1.0))
    start = time.monotonic()
    with pytest.raises(LlmRequestError, match="attempt 1 of 3"):
        client.complete("x", 1)
    assert time.monotonic() - start < 1.0 and _Script.seen == 1
