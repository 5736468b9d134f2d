"""``run --address``: a bounded, configurable wait for the Ray head, then one line."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.errors import InputError
from scalesched.runtime.cluster import wait_for_head


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    """Something that answers on the port, but is not a Ray GCS."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("timeout", [1.0, 2.0])
def test_an_unreachable_head_gives_up_after_the_timeout(timeout: float) -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(
        InputError, match=rf"no Ray head answered at {address} within {timeout:g} s"
    ):
        wait_for_head(address, timeout)
    assert timeout - 0.6 <= time.monotonic() - start <= timeout + 1.5


def test_a_client_address_is_probed_too() -> None:
    with pytest.raises(InputError, match="no Ray head answered at ray://127.0.0.1"):
        wait_for_head(f"ray://127.0.0.1:{free_port()}", 1.0)


def test_something_that_is_not_a_ray_head_ends_within_the_timeout(http_server: str) -> None:
    start = time.monotonic()
    with pytest.raises(InputError, match=f"no Ray head answered at {http_server} within 1.5 s"):
        wait_for_head(http_server, 1.5)
    assert time.monotonic() - start < 3.5


@pytest.mark.parametrize("address", ["nohost", "host:", "host:99999", ":6379"])
def test_malformed_addresses(address: str) -> None:
    with pytest.raises(InputError, match="expected HOST:PORT"):
        wait_for_head(address, 1.0)


def test_run_address_is_one_line_within_the_timeout() -> None:
    pytest.importorskip("ray")
    args = ["run", "--cluster", "hetero-2", "--rate", "1", "--workflows", "2"]
    args += ["--address", f"127.0.0.1:{free_port()}", "--connect-timeout", "1.5"]
    start = time.monotonic()
    result = CliRunner().invoke(app, args)
    assert time.monotonic() - start < 10
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Ray head answered" in lines[0] and "1.5 s" in lines[0]
