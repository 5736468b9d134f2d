"""The serving commands refuse bad input with one line and exit code 2, before they
serve: bad options, bad backend URLs, ports that cannot be listened on."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys

import pytest
from conftest import SRC, free_port
from typer.testing import CliRunner

from scalesched.cli import app
from scalesched.cluster.endpoints import EndpointSettings
from scalesched.errors import InputError
from scalesched.serve.engine import EngineServer, server_of_type
from scalesched.serve.site import serve_apps

runner = CliRunner()


def _fails(args: list[str], *words: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    out = result.output.strip()
    assert out.startswith("error:") and len(out.splitlines()) == 1, out
    for word in words:
        assert word in out, out


def test_serve_names_the_backends_file_and_field(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(
        "backends:\n  - name: x\n    server_type: h100-80g-x1\n    models: {a: b}\n"
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1'}\n"
    )
    _fails(["serve", "--backends", str(path)], "b.yaml", "backends[0].models.a", "unknown")
    _fails(["serve", "--backends", str(tmp_path / "none.yaml")], "no such backends file")


def test_loadgen_and_engine_options_are_checked():
    _fails(["loadgen", "--url", "http://127.0.0.1:1/v1", "--rate", "1", "--load", "0.5"], "--rate")
    _fails(
        ["loadgen", "--url", "http://127.0.0.1:1/v1", "--rate", "1", "--time-scale", "0"],
        "--time-scale",
    )
    _fails(["engine", "--server-type", "h100-80g-x9", "--model", "phi-2"], "--server-type")
    _fails(["engine", "--server-type", "l4-24g-x1", "--model", "llama-2-70b"], "cannot run")


def test_fleet_and_serve_check_the_deployment(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "name: p\ncluster: hetero-8\nreplicas:\n"
        "  - {model: phi-2, server: h100-80g-x4-0, gpus: [0]}\n"
    )
    _fails(["fleet", "--models", "phi-2", "--deployment", str(plan)], "--models", "not both")
    _fails(["fleet", "--cluster", "hetero-16", "--deployment", str(plan)], "plan.yaml", "cluster")
    backends = tmp_path / "b.yaml"
    backends.write_text(
        "backends:\n  - name: h100-80g-x4-0\n    server_type: h100-80g-x4\n"
        "    models: {llama-2-7b: llama-2-7b}\n"
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1'}\n"
    )
    args = ["serve", "--backends", str(backends), "--deployment", str(plan)]
    _fails(args + ["--cluster", "hetero-8"], "b.yaml", "backends[0].models.llama-2-7b")


def test_serve_checks_the_forward_priority_backends(tmp_path):
    backends = tmp_path / "b.yaml"
    backends.write_text(
        "backends:\n  - name: gpu-0\n    server_type: h100-80g-x1\n"
        "    models: {llama: llama-2-7b}\n"
        "    endpoint: {base_url: 'http://127.0.0.1:1/v1'}\n"
    )
    args = ["serve", "--backends", str(backends), "--forward-priority"]
    _fails(args + ["gpu-0,gpu-9"], "--forward-priority", "'gpu-9'", "gpu-0")
    _fails(args + [","], "--forward-priority", "name a backend")


def _backends(tmp_path, url: str):
    path = tmp_path / "b.yaml"
    path.write_text(
        "backends:\n  - name: gpu-0\n    server_type: h100-80g-x1\n"
        f"    models: {{llama: llama-2-7b}}\n    endpoint: {{base_url: '{url}'}}\n"
    )
    return path


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:99999/v1", "port 99999 is not in 1..65535"),
        ("http://127.0.0.1:abc/v1", "the port 'abc' is not a number"),
        ("http://[::1/v1", "not a valid URL"),
        ("http://127.0.0.1:0/v1", "port 0 is not in 1..65535"),
        ("http://:8000/v1", "names no host"),
    ],
)
def test_serve_refuses_a_backend_url_with_a_bad_host_or_port(tmp_path, url, words):
    _fails(["serve", "--backends", str(_backends(tmp_path, url))], "b.yaml", "base_url", words)


def _exits_2(args: list[str], *words: str) -> str:
    """Run a command that must refuse to start; in a process of its own with a deadline,
    since a command that wrongly starts would serve forever."""
    env = {**os.environ, "PYTHONPATH": SRC}
    cmd = [sys.executable, "-m", "scalesched", *args]
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    assert out.startswith("error:") and len(out.strip().splitlines()) == 1, out
    for word in words:
        assert word in out, out
    return out.strip()


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--port", "0"],
        ["serve", "--port", "70000"],
        ["engine", "--server-type", "h100-80g-x1", "--model", "phi-2", "--port", "0"],
        # the dynamic world's fleet: 6 engines (a planned one has as many as its plan uses)
        [
            "fleet",
            "--cluster",
            "hetero-8",
            "--residency",
            "dynamic",
            "--instant",
            "--port",
            "65531",
        ],
    ],
)
def test_a_listening_port_outside_1_to_65535_is_refused(tmp_path, args):
    if args[0] == "serve":
        args = [*args, "--backends", str(_backends(tmp_path, "http://127.0.0.1:8000/v1"))]
    _exits_2(args, "--port", "65535")


def _busy_ports(count: int, busy: int) -> tuple[int, socket.socket]:
    """A first port of ``count`` free ones in a row, the ``busy``-th of them listened on."""
    for _ in range(20):
        first = free_port()
        taken: list[socket.socket] = []
        try:
            for p in range(first, first + count):
                s = socket.socket()
                taken.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in taken:
                s.close()
        holder = socket.socket()
        holder.bind(("127.0.0.1", first + busy))
        holder.listen()
        return first, holder
    raise AssertionError("no run of free ports")


def test_a_busy_port_is_one_line_before_anything_serves(tmp_path):
    port, holder = _busy_ports(1, 0)
    with holder:
        backends = _backends(tmp_path, "http://127.0.0.1:8000/v1")
        for args in (
            ["serve", "--backends", str(backends), "--port", str(port)],
            ["engine", "--server-type", "h100-80g-x1", "--model", "phi-2", "--port", str(port)],
        ):
            out = _exits_2(args)  # and no "serving ..." line before it
            assert (
                out == f"error: --port: cannot listen on 127.0.0.1:{port}: address already in use"
            )


def test_a_fleet_on_a_busy_middle_port_closes_what_it_opened_and_writes_nothing(tmp_path):
    first, holder = _busy_ports(6, 2)  # hetero-8's fleet: 6 engines; the third port taken
    out = tmp_path / "backends.yaml"
    with holder:
        args = ["fleet", "--cluster", "hetero-8", "--residency", "dynamic", "--instant"]
        args += ["--port", str(first)]
        _exits_2([*args, "--backends-out", str(out)], f"127.0.0.1:{first + 2}", "in use")
    assert not out.exists()


def test_a_fleet_that_cannot_bind_closes_the_engines_it_started():
    async def main() -> None:
        first, holder = _busy_ports(3, 2)
        engines = [
            EngineServer(server_of_type("h100-80g-x1"), {"llama": "llama-2-7b"}, 0.0)
            for _ in range(3)
        ]
        with holder, pytest.raises(InputError, match=f"127.0.0.1:{first + 2}"):
            await serve_apps([e.app() for e in engines], "127.0.0.1", first)
        for p in (first, first + 1):  # bound before the busy one, closed again
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", p)) != 0

    asyncio.run(main())


def test_serve_says_serving_only_once_it_listens_and_stops_on_sigterm(tmp_path):
    port = free_port()
    backends = _backends(tmp_path, "http://127.0.0.1:8000/v1")
    env = {**os.environ, "PYTHONPATH": SRC}
    args = ["serve", "--backends", str(backends), "--port", str(port), "--scrape-s", "60"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalesched", *args], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # blocks until the first line (or the process ends)
        assert line.startswith(f"serving http://127.0.0.1:{port}/v1 over 1 backends"), line
        with socket.socket() as s:  # listening already when it said so
            assert s.connect_ex(("127.0.0.1", port)) == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_base_url_with_braces_is_checked_without_being_formatted():
    # "{}" is no placeholder the address check may format (an IndexError before).
    assert EndpointSettings(base_url="http://127.0.0.1:8000/v1/{}").base_url.endswith("{}")
    with pytest.raises(ValueError, match="port 99999"):
        EndpointSettings(base_url="http://{node_ip}:99999/v1")
