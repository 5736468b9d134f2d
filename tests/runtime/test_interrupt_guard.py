"""The pieces that let an interrupted local run clean up, without starting Ray: the signal
guard, the socket-path check and the one-line error of a failed start."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from scalesched.cluster import get_cluster
from scalesched.errors import InputError
from scalesched.runtime.cluster import (
    SOCKET_PATH_MAX,
    InterruptGuard,
    RunInterrupted,
    check_socket_room,
)


def test_a_signal_inside_the_guard_unwinds_the_block() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned = False
    with pytest.raises(RunInterrupted) as info, InterruptGuard():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            pytest.fail("SIGTERM did not interrupt the block")
        finally:
            cleaned = True
    assert info.value.signum == signal.SIGTERM
    assert isinstance(info.value, KeyboardInterrupt)  # Ctrl-C code paths stop on it too
    assert cleaned
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_during_cleanup_waits_for_it_then_is_raised() -> None:
    steps: list[str] = []
    with pytest.raises(RunInterrupted), InterruptGuard() as guard:
        guard.defer()
        os.kill(os.getpid(), signal.SIGINT)
        steps.append("cleanup went on")
    assert steps == ["cleanup went on"]


def test_a_second_signal_does_not_cut_the_cleanup_short() -> None:
    steps: list[str] = []
    with pytest.raises(RunInterrupted), InterruptGuard() as guard:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            pytest.fail("SIGINT did not interrupt the block")
        finally:
            guard.defer()
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("cleanup finished")
    assert steps == ["cleanup finished"]


def test_a_folder_too_long_for_rays_sockets_is_refused_before_ray_starts(tmp_path: Path) -> None:
    check_socket_room(Path("/tmp/ssray-abcdefgh"), 33)
    long = Path("/tmp") / ("x" * SOCKET_PATH_MAX)
    with pytest.raises(InputError, match=r"^TMPDIR: temp_dir: /tmp/x+ is \d+ bytes too long"):
        check_socket_room(long, 3)
    assert "\n" not in str(pytest.raises(InputError, check_socket_room, long, 3).value)


def test_a_failed_start_is_one_line_and_restores_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    import ray.cluster_utils

    from scalesched.runtime.cluster import start_local_cluster

    class Broken:
        def __init__(self, **_: object) -> None:
            raise OSError("no free port\nsecond line")

    monkeypatch.setattr(ray.cluster_utils, "Cluster", Broken)
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    short = Path(tempfile.mkdtemp(prefix="ssg", dir="/tmp"))  # pytest's is too long for Ray
    try:
        with pytest.raises(InputError) as info:
            start_local_cluster(get_cluster("homogeneous-2"), short)
    finally:
        shutil.rmtree(short)
    assert str(info.value) == (
        "--local: ray: the local Ray cluster did not start: no free port second line"
    )
    assert "RAY_TMPDIR" not in os.environ
