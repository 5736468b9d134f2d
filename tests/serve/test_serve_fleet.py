"""A fleet's layout: the port convention ``fleet`` and ``plan --backends-out`` share, and the
world a fleet runs (a planned deployment by default, every model everywhere on
``--residency dynamic`` or ``--models``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SRC
from typer.testing import CliRunner

from scalesched.cli import app  # registers what the serving commands are given
from scalesched.cluster import get_cluster
from scalesched.cluster.endpoints import backends_from_dict
from scalesched.errors import InputError
from scalesched.serve.cli import _fleet_deployment
from scalesched.serve.fleet import FLEET_PORT, fleet_backends_yaml, fleet_servers, fleet_urls

runner = CliRunner()


def test_engine_i_listens_on_the_first_port_plus_i():
    assert fleet_urls("127.0.0.1", FLEET_PORT, 3) == [
        "http://127.0.0.1:18000/v1",
        "http://127.0.0.1:18001/v1",
        "http://127.0.0.1:18002/v1",
    ]
    assert fleet_urls("::1", 9000, 1) == ["http://[::1]:9000/v1"]
    spec = get_cluster("hetero-8")
    plan = fleet_servers(spec, None)
    backends = backends_from_dict(yaml.safe_load(fleet_backends_yaml(plan, "0.0.0.0", 18100)), "t")
    assert [b.name for b in backends] == [s.name for s, _ in plan]
    assert backends[-1].endpoint.base_url == f"http://0.0.0.0:{18100 + len(plan) - 1}/v1"


def test_a_fleet_runs_a_planned_deployment_unless_told_otherwise(tmp_path: Path):
    spec = get_cluster("hetero-8")
    planned, line = _fleet_deployment(spec, "agentic-mix", "planned", 3.0, 0.7, None, None)
    assert planned is not None and planned.name.startswith("plan-hetero-8-3wps-")
    assert line == f"world: planned, deployment {planned.name} for 3 workflows/s"
    models = {s.name: set(m) for s, m in fleet_servers(spec, None, planned)}
    assert models and all(models.values())  # only the servers the plan uses, its models
    everywhere = fleet_servers(spec, None)
    assert sum(map(len, models.values())) < sum(len(m) for _, m in everywhere)
    for residency, chosen in (("dynamic", None), ("planned", ["phi-2"])):
        pinned, line = _fleet_deployment(spec, "agentic-mix", residency, 3.0, 0.7, chosen, None)
        assert pinned is None and line.startswith("world: dynamic (")
    with pytest.raises(InputError, match="residency"):
        _fleet_deployment(spec, "agentic-mix", "static", None, 0.7, None, None)
    out = runner.invoke(
        app, ["fleet", "--residency", "dynamic", "--deployment-out", str(tmp_path / "d.yaml")]
    )
    assert out.exit_code == 2 and "runs no deployment" in out.output


def _free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now."""
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = int(s.getsockname()[1])
        if first + count > 65535:
            continue
        held = []
        try:
            for p in range(first, first + count):
                h = socket.socket()
                held.append(h)
                h.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
        finally:
            for h in held:
                h.close()
    raise AssertionError("no run of free ports")


def test_plan_writes_the_backends_file_of_the_fleet_that_serves_it(tmp_path: Path):
    """``plan --backends-out`` before anything runs names the URLs a planned fleet for the
    same rate then listens on: the same file ``fleet --backends-out`` writes."""
    port = _free_ports(8)
    planned, served, deployment = (tmp_path / n for n in ("plan.yaml", "fleet.yaml", "d.yaml"))
    args = ["plan", "--cluster", "hetero-8", "--rate", "3", "--out", str(tmp_path / "p.yaml")]
    out = runner.invoke(app, [*args, "--backends-out", str(planned), "--fleet-port", str(port)])
    assert out.exit_code == 0, out.output
    env = {**os.environ, "PYTHONPATH": SRC}
    args = ["fleet", "--cluster", "hetero-8", "--rate", "3", "--instant", "--port", str(port)]
    args += ["--backends-out", str(served), "--deployment-out", str(deployment)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "scalesched", *args], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        world = proc.stderr.readline()
        assert world.startswith("world: planned, deployment plan-hetero-8-3wps-"), world
        listening = proc.stderr.readline()
        engines = len(yaml.safe_load(planned.read_text())["backends"])
        assert listening.startswith(f"{engines} engines on http://127.0.0.1:{port}/v1"), listening
        assert proc.stderr.readline().startswith("backends file written")
        assert served.read_text() == planned.read_text()
        assert yaml.safe_load(deployment.read_text())["name"] in world
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_plan_refuses_a_fleet_that_would_run_out_of_ports(tmp_path: Path):
    args = ["plan", "--cluster", "hetero-8", "--rate", "3", "--fleet-port", "65535"]
    out = runner.invoke(app, [*args, "--backends-out", str(tmp_path / "b.yaml")])
    assert out.exit_code == 2 and "--fleet-port" in out.output and "65535" in out.output
    assert not (tmp_path / "b.yaml").exists()
