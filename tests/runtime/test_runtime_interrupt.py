"""An interrupted ``scalesched run --local`` leaves nothing behind: no Ray process, no
worker, no temp folder (runtime/cluster.py's ``local_cluster`` and its interrupt guard)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.ray

SERVERS = 2
"""homogeneous-2: a head node and two server nodes, the smallest cluster that places."""
START_DEADLINE_S = 120.0


def _descendants(pid: int) -> list[Any]:
    try:
        return list(psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return []


def _title(process: Any) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _wait_for(run: subprocess.Popen[str], phase: str) -> list[Any]:
    """The run's processes once it reaches ``phase``: ``starting``, the head node's raylet
    is up while the server nodes are still being added; ``running``, every server's agent
    actor is up (Ray has started and the run places tasks; each ``ServerAgent`` actor
    titles its process ``ray::ServerAgent``)."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if run.poll() is not None:
            out = run.stdout.read() if run.stdout else ""
            pytest.fail(f"the run ended before it was interrupted ({run.returncode}): {out}")
        processes = _descendants(run.pid)
        titles = [_title(p) for p in processes]
        if phase == "starting" and any("raylet" in t.split(" ")[0] for t in titles):
            return processes
        if sum(t.startswith("ray::ServerAgent") for t in titles) >= SERVERS:
            return processes
        time.sleep(0.2)
    pytest.fail(f"the local Ray cluster was not {phase} within {START_DEADLINE_S:g} s")


def _alive(processes: list[Any]) -> list[str]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {_title(p)[:80]}")
        except psutil.Error:
            continue
    return out


def _mentioning(folder: Path) -> list[str]:
    """Processes whose command line names ``folder`` (Ray's GCS and raylets name their
    session folder)."""
    out = []
    for p in psutil.process_iter():
        title = _title(p)
        if str(folder) in title:
            out.append(f"{p.pid} {title[:80]}")
    return out


@pytest.mark.parametrize(
    ("signum", "phase"),
    [(signal.SIGINT, "running"), (signal.SIGTERM, "starting")],
    ids=["SIGINT-running", "SIGTERM-starting"],
)
def test_an_interrupted_local_run_leaves_nothing_behind(signum: int, phase: str) -> None:
    # Not under pytest's tmp_path: Ray's socket paths under it would pass the 107-byte
    # limit of a Unix socket (check_socket_room refuses such a folder). A short folder of
    # this test's own instead, removed at the end.
    tmp = Path(tempfile.mkdtemp(prefix="ssi", dir="/tmp"))
    env = {
        **os.environ,
        "TMPDIR": str(tmp),  # where local_cluster makes its folder
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    argv = [sys.executable, "-m", "scalesched", "run", "--local", "--cluster", "homogeneous-2"]
    argv += ["--workflows", "40", "--rate", "0.2", "--time-scale", "1", "--object-store-mb", "80"]
    run = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    processes: list[Any] = []
    try:
        processes = _wait_for(run, phase)
        assert list(tmp.glob("ssray-*")), "the run keeps its Ray files under TMPDIR"
        run.send_signal(signum)
        # Ray starts the rest (workers, agents, nodes) in the meantime: watch them all
        processes = [*processes, *_descendants(run.pid)]
        out, _ = run.communicate(timeout=60)
        assert run.returncode != 0, out
        assert "Traceback" not in out, out
        # Agents notice their node is gone on their own schedule: slower on a loaded machine.
        deadline = time.monotonic() + 30
        while (_alive(processes) or _mentioning(tmp)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(processes) == [], f"processes left running:\n{out}"
        assert _mentioning(tmp) == []
        assert list(tmp.iterdir()) == [], "the run's temp folder is left behind"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for p in processes:  # only if the test failed: never leave its cluster running
            try:
                p.kill()
            except psutil.Error:
                continue
        shutil.rmtree(tmp, ignore_errors=True)
