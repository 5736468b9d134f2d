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
import tempfile
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
        import ray

        with contextlib.suppress(Exception):
            ray.shutdown()
        with contextlib.suppress(Exception):
            self.cluster.shutdown()
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
    try:
        head: dict[str, Any] = {
            "num_cpus": 0,
            "num_gpus": 0,
            "object_store_memory": object_store_mb * 1024 * 1024,
            "temp_dir": str(temp),
            "include_dashboard": False,
            "_system_config": cfg,
        }
        cluster = Cluster(initialize_head=True, head_node_args=head)
        nodes = [cluster.add_node(**node_args(s)) for s in spec.servers]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
    except BaseException:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.shutdown()
        for key, value in backup.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        raise
    return LocalCluster(spec, cluster, nodes, temp, backup)


@contextlib.contextmanager
def local_cluster(
    spec: ClusterSpec,
    temp_dir: str | os.PathLike[str] | None = None,
    *,
    object_store_mb: int = DEFAULT_OBJECT_STORE_MB,
    system_config: Mapping[str, Any] | None = None,
) -> Iterator[LocalCluster]:
    """``start_local_cluster`` as a context manager; without ``temp_dir`` a fresh folder
    under the system temp dir is used and removed afterwards."""
    own = temp_dir is None
    temp = Path(tempfile.mkdtemp(prefix="ssray-")) if own else Path(temp_dir)  # type: ignore[arg-type]
    lc = start_local_cluster(
        spec, temp, object_store_mb=object_store_mb, system_config=system_config
    )
    try:
        yield lc
    finally:
        lc.shutdown()
        if own:
            shutil.rmtree(temp, ignore_errors=True)


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
