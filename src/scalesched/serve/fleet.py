"""A fleet's layout, without the serving libraries: which GPU servers serve which models
(``fleet_servers``), the ports they listen on, and the backends file that names them.

``fleet`` writes the backends file once its engines listen; ``plan --backends-out`` writes
the same file for the fleet that would serve its deployment, before anything runs. One
port convention serves both: engine ``i`` listens on the first port plus ``i``.
"""

from __future__ import annotations

from scalesched.cluster.catalog import SERVER_TYPES, can_host
from scalesched.cluster.deployment import Deployment
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.perf import MODELS
from scalesched.errors import InputError


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def base_url(host: str, port: int) -> str:
    """The OpenAI base URL of an app served on host:port: what ``serve.site.run_apps``
    reports and what a backends file written before anything listens names."""
    return f"http://{url_host(host)}:{port}/v1"


FLEET_HOST = "127.0.0.1"
"""The address ``fleet`` listens on by default."""
FLEET_PORT = 18000
"""``fleet``'s first port by default: engine ``i`` of :func:`fleet_servers`'s list listens
on ``FLEET_PORT + i``. The one convention ``fleet --backends-out`` and ``plan
--backends-out`` both follow (:func:`fleet_backends_yaml`)."""


def fleet_urls(host: str, port: int, count: int) -> list[str]:
    """The base URLs of a fleet of ``count`` engines from ``port``: consecutive ports, in
    :func:`fleet_servers`'s order (what ``run_engines`` binds)."""
    return [base_url(host, port + i) for i in range(count)]


def fleet_backends_yaml(plan: list[tuple[ServerSpec, dict[str, str]]], host: str, port: int) -> str:
    """The backends file of a fleet serving ``plan`` (:func:`fleet_servers`) on consecutive
    ports from ``port``: what ``fleet --backends-out`` writes once it listens, and what
    ``plan --backends-out`` writes for the fleet that would serve its deployment."""
    urls = fleet_urls(host, port, len(plan))
    return backends_yaml([(s, m, u) for (s, m), u in zip(plan, urls, strict=True)])


def fleet_servers(
    cluster: ClusterSpec, models: list[str] | None, deployment: Deployment | None = None
) -> list[tuple[ServerSpec, dict[str, str]]]:
    """The GPU servers of ``cluster`` with the catalog models each serves: the replicas a
    ``deployment`` places there, or else ``models`` (default: every catalog model) that fit
    (servers that serve none are left out)."""
    if deployment is not None:
        placed: dict[str, set[str]] = {}
        for r in deployment.replicas:
            placed.setdefault(r.server, set()).add(r.model)
        return [
            (s, {m: m for m in sorted(placed[s.name])}) for s in cluster.servers if s.name in placed
        ]
    out = []
    for server in cluster.servers:
        if server.gpu_type is None or server.gpus <= 0:
            continue
        if server.type not in SERVER_TYPES:
            raise InputError(
                cluster.name,
                f"servers.{server.name}",
                f"type {server.type} is not a catalog server type",
            )
        names = [m for m in (models or sorted(MODELS)) if can_host(server, m)]
        if names:
            out.append((server, {m: m for m in names}))
    if not out:
        raise InputError(cluster.name, "servers", "no GPU server can run the chosen models")
    return out


def backends_yaml(entries: list[tuple[ServerSpec, dict[str, str], str]]) -> str:
    """A backends file for (server, models, base_url) triples."""
    import yaml

    backends = [
        {
            "name": s.name,
            "server_type": s.type,
            "models": dict(models),
            "endpoint": {"base_url": url},
        }
        for s, models, url in entries
    ]
    return yaml.safe_dump({"backends": backends}, sort_keys=False)
