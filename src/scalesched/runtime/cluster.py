"""Ray nodes as scalesched servers: how a node declares its server, and a local cluster.

Every Ray node that is a scalesched server declares it in two ways (docs/runtime.md):

* a custom resource ``scalesched_server:<server name>`` of 1, plus ``scalesched_type:<server
  type>`` of 1 (resources are what ``ray start --resources`` takes on any Ray version);
* the labels ``scalesched.io/server=<server name>`` and ``scalesched.io/type=<server type>``
  (informational; resources are what the runtime reads).

The server names are those of the ``ClusterSpec`` the run uses (a preset such as
``hetero-8`` names its servers ``h100-80g-x4-0``, ``a100-80g-x4-0``, ...). A node declaring
no ``scalesched_server:`` resource is not a server: nothing is placed on it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.errors import InputError

SERVER_RESOURCE_PREFIX = "scalesched_server:"
TYPE_RESOURCE_PREFIX = "scalesched_type:"
CORE_RESOURCE = "scalesched_cores"
"""The server's cores, held by a tool task running as a Ray task (not ``CPU``: Ray lends a
task's CPU out while it blocks in ``ray.get``)."""
MODEL_RESOURCE_PREFIX = "scalesched_model:"
"""``scalesched_model:<model>`` on every server that can run the model (LLM tasks that run
as Ray tasks ask for 1, so that Ray's own scheduler knows where a model fits)."""
MODEL_SLOTS = 1024
SERVER_LABEL = "scalesched.io/server"
TYPE_LABEL = "scalesched.io/type"
DEFAULT_OBJECT_STORE_MB = 80
"""Per node; Ray needs at least 75 MiB. Emulated tasks move no real payloads."""
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
"""Set for local clusters: no auth token to manage, no usage reporting."""
FAST_FAILURE_DETECTION = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 4,
    "health_check_timeout_ms": 1000,
}
"""GCS settings of local clusters: a dead node is declared dead within ~2-3 s."""


def node_resources(server: ServerSpec) -> dict[str, float]:
    """The custom resources a Ray node hosting ``server`` declares."""
    from scalesched.cluster.catalog import can_host
    from scalesched.cluster.tables import MODEL_NAMES

    out = {
        SERVER_RESOURCE_PREFIX + server.name: 1.0,
        TYPE_RESOURCE_PREFIX + server.type: 1.0,
        CORE_RESOURCE: float(server.cpu_cores),
    }
    for model in MODEL_NAMES:
        if can_host(server, model):
            out[MODEL_RESOURCE_PREFIX + model] = float(MODEL_SLOTS)
    return out


def node_labels(server: ServerSpec) -> dict[str, str]:
    return {SERVER_LABEL: server.name, TYPE_LABEL: server.type}


def ray_start_command(server: ServerSpec, head_address: str = "HEAD:6379") -> str:
    """The ``ray start`` line that makes a machine the server ``server`` (docs/runtime.md)."""
    import json

    return (
        f"ray start --address={head_address} --num-cpus={server.cpu_cores} "
        f"--resources='{json.dumps(node_resources(server))}' "
        f"--labels='{json.dumps(node_labels(server))}'"
    )


def map_servers(spec: ClusterSpec, nodes: list[dict[str, Any]]) -> list[str]:
    """Ray node id of every server of ``spec`` (index order), from ``ray.nodes()`` rows.

    Fails with one line naming the servers no live node declares."""
    by_server: dict[str, str] = {}
    for node in nodes:
        if not node.get("Alive", False):
            continue
        for key in node.get("Resources", {}):
            if key.startswith(SERVER_RESOURCE_PREFIX):
                by_server[key.removeprefix(SERVER_RESOURCE_PREFIX)] = str(node["NodeID"])
    missing = [s.name for s in spec.servers if s.name not in by_server]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise InputError(
            "--address",
            "nodes",
            f"no live Ray node declares {SERVER_RESOURCE_PREFIX}<name> for {len(missing)} "
            f"server(s) of {spec.name}: {shown} (see docs/runtime.md)",
        )
    return [by_server[s.name] for s in spec.servers]


@dataclass
class LocalCluster:
    """A multi-node Ray cluster on this machine: one Ray node per server."""

    spec: ClusterSpec
    cluster: Any
    """The ``ray.cluster_utils.Cluster``."""
    nodes: list[Any]
    """Ray's node handles, in server order (the head node, where the driver connects,
    hosts no server)."""
    temp_dir: Path
    _env_backup: dict[str, str | None] = field(default_factory=dict)
    _spawned: list[Any] = field(default_factory=list)
    """``psutil.Process`` of every process the start spawned (Ray's GCS, raylets, agents,
    reaper), so that :meth:`shutdown` can end what Ray's own teardown leaves running."""

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def kill_server(self, index: int) -> None:
        """Kill the node of server ``index`` and every process on it, without warning (as
        when a machine dies): its worker processes first, then the raylet and the rest."""
        import signal

        node = self.nodes[index]
        workers: list[int] = []
        with contextlib.suppress(Exception):
            import psutil

            raylet = node.all_processes["raylet"][0].process.pid
            workers = [c.pid for c in psutil.Process(raylet).children(recursive=True)]
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.cluster.remove_node(node, allow_graceful=False)

    def shutdown(self) -> None:
        """Disconnect, stop every node, then end any process of the cluster still running
        (Ray's teardown can leave a node's dashboard and runtime-env agents, or workers,
        behind when it is cut short) and restore the environment."""
        import ray

        ray_processes = _with_descendants(self._spawned)  # before the tree comes apart
        with contextlib.suppress(Exception):
            ray.shutdown()
        with contextlib.suppress(Exception):
            self.cluster.shutdown()
        _end_processes(ray_processes)
        for key, value in self._env_backup.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def start_local_cluster(
    spec: ClusterSpec,
    temp_dir: str | os.PathLike[str],
    *,
    object_store_mb: int = DEFAULT_OBJECT_STORE_MB,
    system_config: Mapping[str, Any] | None = None,
) -> LocalCluster:
    """Start a head node (no server: the driver's) and one Ray node per server of ``spec``,
    and connect to the cluster.

    Each node declares the server's resources and labels, ``num_cpus`` = the server's cores
    (logical: a 2-core machine hosts any number of 32-core servers) and an explicit object
    store of ``object_store_mb`` MiB. Ray's files go under ``temp_dir``.
    """
    import ray
    from ray.cluster_utils import Cluster

    if object_store_mb < 75:
        raise InputError("--object-store-mb", "object_store_mb", "Ray needs at least 75 MiB")
    temp = Path(temp_dir)
    check_socket_room(temp, len(spec) + 1)
    (temp / "ray").mkdir(parents=True, exist_ok=True)  # Ray's address file goes there
    env = {**RAY_ENV, "RAY_TMPDIR": str(temp)}
    backup = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cfg = {**FAST_FAILURE_DETECTION, **(system_config or {})}

    def node_args(server: ServerSpec) -> dict[str, Any]:
        return {
            "num_cpus": server.cpu_cores,
            "num_gpus": 0,
            "object_store_memory": object_store_mb * 1024 * 1024,
            "resources": node_resources(server),
            "labels": node_labels(server),
        }

    cluster = None
    before = _child_pids()
    try:
        head: dict[str, Any] = {
            "num_cpus": 0,
            "num_gpus": 0,
            "object_store_memory": object_store_mb * 1024 * 1024,
            "temp_dir": str(temp),
            "include_dashboard": False,
            "_system_config": cfg,
        }
        with _no_drain_wait():
            cluster = Cluster(initialize_head=True, head_node_args=head)
            nodes = [cluster.add_node(**node_args(s)) for s in spec.servers]
            cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
    except BaseException as exc:
        spawned = _with_descendants(_new_children(before))
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.shutdown()
        _end_processes(spawned)
        for key, value in backup.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if isinstance(exc, Exception) and not isinstance(exc, InputError):
            why = " ".join(str(exc).split())[:200] or type(exc).__name__
            raise InputError(
                "--local", "ray", f"the local Ray cluster did not start: {why}"
            ) from exc
        raise
    return LocalCluster(spec, cluster, nodes, temp, backup, _new_children(before))


@contextlib.contextmanager
def _no_drain_wait() -> Iterator[None]:
    """While the nodes start, a SIGTERM reaches the handler each Ray node sets as it starts
    (``local_cluster`` installs its own once they are up), which first waits up to 30 s for
    the node to drain; a local cluster has nothing to drain, so within the block that wait
    is 0 (Ray's ``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S``, read once when Ray is imported,
    hence set on Ray's constant; restored after)."""
    try:
        from ray._private import ray_constants
    except ImportError:
        yield
        return
    name = "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"
    if not hasattr(ray_constants, name):
        yield
        return
    old = getattr(ray_constants, name)
    setattr(ray_constants, name, 0.0)
    try:
        yield
    finally:
        setattr(ray_constants, name, old)


SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107
"""The longest Unix socket path Ray accepts (the kernel's ``sun_path`` less its NUL)."""
_SESSION_DIR = "/session_YYYY-MM-DD_HH-MM-SS_ffffff_" + "9" * 7
"""Ray's session folder: ``session_<date>_<time>_<microseconds>_<pid>`` (pids have at most
7 digits on Linux)."""


def check_socket_room(temp: Path, nodes: int) -> None:
    """Refuse, before any Ray process starts, a folder too long for Ray's socket paths
    (``<temp>/session_.../sockets/plasma_store.<node>``): Ray would fail half-way through
    starting, with a traceback, after some nodes run."""
    longest = f"{temp.absolute()}{_SESSION_DIR}/sockets/plasma_store.{nodes}"
    over = len(longest.encode()) - SOCKET_PATH_MAX
    if over > 0:
        raise InputError(
            "TMPDIR",
            "temp_dir",
            f"{temp} is {over} bytes too long for Ray's socket paths under it (at most "
            f"{SOCKET_PATH_MAX} bytes for a Unix socket); set TMPDIR (or pass temp_dir) to a "
            "shorter folder",
        )


@contextlib.contextmanager
def local_cluster(
    spec: ClusterSpec,
    temp_dir: str | os.PathLike[str] | None = None,
    *,
    object_store_mb: int = DEFAULT_OBJECT_STORE_MB,
    system_config: Mapping[str, Any] | None = None,
) -> Iterator[LocalCluster]:
    """``start_local_cluster`` as a context manager; without ``temp_dir`` a fresh folder
    under the system temp dir is used and removed afterwards.

    An interrupted run leaves nothing behind: inside the block (and while Ray starts) a
    SIGINT, SIGTERM or SIGHUP raises :class:`RunInterrupted` in the main thread, so the
    block unwinds and the cluster is shut down, its processes ended and its folder removed;
    a second signal during that cleanup waits until it is done instead of cutting it short.
    (SIGTERM would otherwise end the process at once, or, once Ray has set its own handler,
    stop one node and exit, leaving the rest.)"""
    own = temp_dir is None
    temp = Path(tempfile.mkdtemp(prefix="ssray-")) if own else Path(temp_dir)  # type: ignore[arg-type]
    before = _child_pids()
    was_subreaper = _subreaper(True) if own else None
    with InterruptGuard() as guard:
        try:
            lc = start_local_cluster(
                spec, temp, object_store_mb=object_store_mb, system_config=system_config
            )
            guard.install()  # again: each Ray node set its own SIGTERM handler as it started
            try:
                yield lc
            finally:
                guard.defer()
                lc.shutdown()
        finally:
            guard.defer()
            if own:  # a folder of our own: whatever names it is ours
                _end_stragglers(temp, before)
                _remove_tree(temp)
            if was_subreaper is not None:
                _subreaper(was_subreaper)


class RunInterrupted(KeyboardInterrupt):
    """A signal that ended a run, raised in the main thread so every ``finally`` runs (a
    ``KeyboardInterrupt``, so code that stops on Ctrl-C stops on SIGTERM too)."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = int(signum)
        super().__init__(f"interrupted by {signal.Signals(signum).name}")


INTERRUPT_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class InterruptGuard:
    """SIGINT/SIGTERM/SIGHUP handling of a local cluster's lifetime, as a context manager.

    Within it the first signal raises :class:`RunInterrupted` (so the run unwinds) until
    :meth:`defer` is called; from then on signals are only noted, so a second Ctrl-C cannot
    cut the cleanup short. A signal noted during a cleanup that was not itself caused by
    one is raised when the block ends. The previous handlers come back at the end. Signals
    are handled only in the main thread; elsewhere the guard does nothing."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self._raise = True
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> InterruptGuard:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            numbers = [getattr(signal, n) for n in INTERRUPT_SIGNALS if hasattr(signal, n)]
            self._previous = {n: signal.getsignal(n) for n in numbers}
            self.install()
        return self

    def install(self) -> None:
        """(Re)install the guard's handler (Ray replaces the SIGTERM handler)."""
        import signal

        for n in self._previous:
            signal.signal(n, self._handle)

    def defer(self) -> None:
        """From now on, note signals instead of raising them."""
        self._raise = False

    def _handle(self, signum: int, frame: object) -> None:
        if self.pending is not None:
            return
        self.pending = signum
        if self._raise:
            self._raise = False
            raise RunInterrupted(signum)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        import signal

        for n, old in self._previous.items():
            signal.signal(n, old if old is not None else signal.SIG_DFL)
        if kind is None and self.pending is not None:
            raise RunInterrupted(self.pending)


def _child_pids() -> set[int]:
    """Pids of this process's direct children (empty without psutil)."""
    try:
        import psutil
    except ImportError:
        return set()
    with contextlib.suppress(psutil.Error):
        return {c.pid for c in psutil.Process().children()}
    return set()


def _new_children(before: set[int]) -> list[Any]:
    """``psutil.Process`` of the direct children started since ``before`` was taken."""
    try:
        import psutil
    except ImportError:
        return []
    with contextlib.suppress(psutil.Error):
        return [c for c in psutil.Process().children() if c.pid not in before]
    return []


def _with_descendants(roots: list[Any]) -> list[Any]:
    """``roots`` and every live descendant of them (workers and agents under a raylet)."""
    out = {p.pid: p for p in roots}
    for root in roots:
        with contextlib.suppress(Exception):
            out.update({c.pid: c for c in root.children(recursive=True)})
    return list(out.values())


def _end_processes(processes: list[Any], grace_s: float = 3.0) -> None:
    """SIGTERM the processes still running, then SIGKILL those alive after ``grace_s``.
    ``psutil.Process`` checks the start time, so a reused pid is never signalled."""
    if not processes:
        return
    import psutil

    alive = [p for p in processes if _running(p)]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(alive, timeout=grace_s)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=grace_s)


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def _subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (Linux ``prctl``), or stop being one; returns
    what it was before, None where the call is not available. While it is one, a process
    of the cluster whose parent died (an agent a raylet spawned as it was being torn down)
    becomes our child instead of init's, so that it can be found and ended."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
            return None
        libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)
        return bool(was.value)
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return None


def _end_stragglers(
    temp: Path, before: set[int], settle_s: float = 1.0, limit_s: float = 15.0
) -> None:
    """End every process left of the cluster, until none has appeared for ``settle_s`` (at
    most ``limit_s``): a direct child of ours not there before the cluster started (an
    orphaned agent comes back to us as a subreaper; the workers of another cluster this
    process runs are its raylets' children, never ours), or any process naming the
    cluster's folder. A
    node interrupted while starting can still spawn its dashboard and runtime-env agents
    after its teardown, later on a loaded machine."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with the runtime extra
        return
    folder = str(temp)
    me = psutil.Process()
    deadline = time.monotonic() + limit_s
    quiet_since = time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - quiet_since < settle_s:
        found: dict[int, Any] = {}
        with contextlib.suppress(psutil.Error):
            for p in me.children():  # direct children only: another cluster's workers are not
                if p.pid not in before:
                    found[p.pid] = p
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if p.pid != me.pid and folder in " ".join(p.cmdline()):
                    found[p.pid] = p
        alive = [p for p in found.values() if _running(p)]
        if alive:
            _end_processes(alive, grace_s=1.0)
            quiet_since = time.monotonic()
        time.sleep(0.1)


def _running(process: Any) -> bool:
    import psutil

    try:
        return bool(process.is_running()) and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _remove_tree(folder: Path, attempts: int = 5) -> None:
    """Remove ``folder``, retrying briefly: a process that was just ended may still have
    been writing a log or socket file into it."""
    import time

    for _ in range(attempts):
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
        time.sleep(0.2)


DEFAULT_CONNECT_TIMEOUT_S = 30.0
"""How long ``scalesched run --address`` waits for a Ray head before giving up."""


def wait_for_head(address: str, timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S) -> None:
    """Wait until a Ray head answers at ``address`` (``HOST:PORT`` of its GCS, or
    ``ray://HOST:PORT`` of a Ray Client server), retrying for at most ``timeout_s``; else a
    one-line ``InputError``.

    ``ray.init`` on an unreachable head retries its GCS connection for many minutes and
    logs every attempt. This asks the GCS for its cluster id over gRPC instead (a
    ``ray://`` address gets a TCP connection check), so the wait is bounded and the error
    says what is wrong. ``auto`` and ``local`` (resolved by Ray itself) are not probed.
    """
    import math
    import time

    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise InputError("--connect-timeout", "timeout", f"must be positive, got {timeout_s}")
    if address in ("auto", "local"):
        return
    client = address.startswith("ray://")
    target = address.split("://", 1)[-1]
    host, sep, port_text = target.rpartition(":")
    if not sep or not host.strip("[]") or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InputError("--address", "address", f"expected HOST:PORT, got {address!r}")
    probe = _tcp_probe if client else _gcs_probe
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        answer = probe(target, max(0.1, min(left, 5.0)))
        if answer is None:
            return
        retry, why = answer
        if not retry:
            raise InputError("--address", "address", f"{address} is not a Ray head ({why})")
        if time.monotonic() + 0.5 >= deadline:
            raise InputError(
                "--address",
                "address",
                f"no Ray head answered at {address} within {timeout_s:g} s ({why}); check the "
                "address and that `ray start --head` runs there (--connect-timeout waits longer)",
            )
        time.sleep(0.5)


def _tcp_probe(host_port: str, timeout_s: float) -> tuple[bool, str] | None:
    """None when something accepts a TCP connection; else (retry, why)."""
    import socket

    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:  # refused, unreachable, unknown host, timed out
        return True, " ".join(str(exc).split()) or type(exc).__name__


def _gcs_probe(target: str, timeout_s: float) -> tuple[bool, str] | None:
    """None when a Ray GCS answers at ``target``; else (retry, why): retry while nothing
    answers, give up at once when something that is not a GCS does."""
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            request = gcs_service_pb2.GetClusterIdRequest()  # type: ignore[attr-defined]
            stub.GetClusterId(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            detail = " ".join(str(exc.details() if hasattr(exc, "details") else exc).split())
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return True, detail[:120] or "unavailable"
            if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return None  # a head is there; ray.init reports what it needs
            return False, f"gRPC {getattr(code, 'name', code)}: {detail[:120]}"
    return None
