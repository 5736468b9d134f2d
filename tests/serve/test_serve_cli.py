"""The serving commands refuse bad input with one line and exit code 2, before they
serve: bad options, bad backend URLs, ports that cannot be listened on."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from scalesched.cli import app

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
