"""Shared helpers of the serve tests: engines and gateways on 127.0.0.1, ephemeral ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scalesched.cluster.endpoints import BackendEntry, EndpointSettings
from scalesched.decision.scheduler import BaseScheduler

SRC = str(Path(__file__).resolve().parents[2] / "src")


def backend(
    name: str,
    url: str,
    served: str = "llama",
    catalog: str = "llama-2-7b",
    server_type: str = "h100-80g-x1",
) -> BackendEntry:
    return BackendEntry(
        name=name,
        endpoint=EndpointSettings(base_url=url, timeout_s=20.0),
        models={served: catalog},
        server_type=server_type,
    )


class Prefer(BaseScheduler):
    """Places on the first open server of ``order`` (a test's way to steer placements)."""

    name = "prefer"

    def __init__(self, order: list[int]) -> None:
        self.order = order

    def select(self, decision):  # type: ignore[no-untyped-def]
        return next(s for s in self.order if decision.mask[s])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EngineProcess:
    """An emulated engine in a subprocess, so that a test can kill it (SIGKILL)."""

    def __init__(self, port: int, time_scale: float) -> None:
        self.port, self.time_scale = port, time_scale
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        code = (
            "from scalesched.serve.engine import EngineServer, server_of_type, run_engines;"
            f"e = EngineServer(server_of_type('h100-80g-x1'), {{'llama': 'llama-2-7b'}}, "
            f"{self.time_scale});"
            f"run_engines([e], '127.0.0.1', {self.port}, lambda u: print('ready', flush=True))"
        )
        env = {**os.environ, "PYTHONPATH": SRC}
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 30
        line = self.proc.stdout.readline()  # blocks until ready (or the process dies)
        assert line.strip() == b"ready" and time.monotonic() < deadline, line

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def engine_process():
    started: list[EngineProcess] = []

    def make(port: int, time_scale: float) -> EngineProcess:
        p = EngineProcess(port, time_scale)
        p.start()
        started.append(p)
        return p

    yield make
    for p in started:
        p.kill()
