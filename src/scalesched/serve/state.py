"""The gateway's live cluster state: the ``ClusterStateView`` its decisions read.

The gateway is an executor like the simulator and the Ray runtime, so it keeps the same
ledger (:class:`~scalesched.kernel.ledger.RunLedger`: the per-server arrays, which
servers are alive, the route memory the cache features read) over a cluster built from the
backends file, one server per backend of its catalog server type, and builds every
decision with :func:`~scalesched.decision.features.make_decision`. What differs is where
the numbers come from: no jobs are known ahead (each HTTP request is a one-call task), so
placements are booked from the request itself, and the backends' own ``/metrics``
(scraped on an interval) add the load the gateway did not send (other clients, requests
it lost track of). Its clock is model seconds: wall seconds over ``time_scale`` (1 for real
engines; the emulated fleet's scale for an emulated one), so estimates compare with it.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

from scalesched.cluster.catalog import SERVER_TYPES
from scalesched.cluster.deployment import (
    Deployment,
    deployment_from_dict,
    deployment_to_dict,
)
from scalesched.cluster.endpoints import BackendEntry
from scalesched.cluster.model import ClusterSpec, ServerSpec
from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.features import ENGINE_READY, Decision, TaskRequest, make_decision
from scalesched.errors import InputError
from scalesched.kernel.ledger import RunLedger
from scalesched.serve.protocol import NO_SIGNALS, CompletionRequest, TaskSignals, count_tokens

V = TypeVar("V")

MAX_REMEMBERED = 100_000
"""Workflows and sessions remembered (least recently seen forgotten first)."""


def deployment_on_backends(
    deployment: Deployment, backends: Sequence[BackendEntry], source: str
) -> Deployment:
    """``deployment`` (validated against its cluster) re-read on the backends' cluster,
    its servers matched to backends by name, so that the gateway's decisions see the very
    engines the backends run. Both sides must agree: a replica on a server no backend is
    named after, or a backend model without a replica there, is an input error (it would
    make the gateway and the simulator compare different clusters)."""
    cluster = backends_cluster(backends)
    names = {b.name: i for i, b in enumerate(backends)}
    for i, r in enumerate(deployment.replicas):
        if r.server not in names:
            raise InputError(
                "--deployment", f"replicas[{i}].server", f"no backend is named {r.server!r}"
            )
    placed = {(r.server, r.model) for r in deployment.replicas}
    for s, b in enumerate(backends):
        for served, catalog in b.models.items():
            if (b.name, catalog) not in placed:
                raise InputError(
                    source,
                    f"backends[{s}].models.{served}",
                    f"the deployment places no {catalog} replica on {b.name}",
                )
    data = deployment_to_dict(deployment.name, cluster.name, list(deployment.replicas))
    return deployment_from_dict(data, cluster, "--deployment")


def backends_cluster(backends: Sequence[BackendEntry]) -> ClusterSpec:
    """One server per backend, named after it, of its catalog server type."""
    servers = []
    for b in backends:
        t = SERVER_TYPES[b.server_type].instance(0)
        servers.append(
            ServerSpec(
                b.name,
                t.type,
                t.gpu_type,
                t.gpus,
                t.cpu_cores,
                t.core_speed,
                t.nic_gbps,
                t.load_gbs,
            )
        )
    return ClusterSpec("backends", tuple(servers))


class GatewayState(RunLedger):
    """The ledger of the gateway's placements plus what the backends report."""

    def __init__(
        self,
        backends: Sequence[BackendEntry],
        time_scale: float = 1.0,
        source: str = "backends",
        deployment: Deployment | None = None,
    ) -> None:
        pinned = deployment_on_backends(deployment, backends, source) if deployment else None
        tables = ClusterTables(backends_cluster(backends), pinned)
        super().__init__(tables, ())
        self.time_scale = time_scale
        self._t0 = time.perf_counter()
        n = tables.n
        self.catalog: dict[str, int] = {}
        """Served model name -> catalog model index (one per name across backends)."""
        self.serving: dict[str, np.ndarray] = {}
        """Served model name -> (N,) bool: the backends that serve it."""
        for s, b in enumerate(backends):
            for served, catalog in b.models.items():
                m = MODEL_INDEX[catalog]
                if self.catalog.setdefault(served, m) != m:
                    raise InputError(
                        source,
                        f"backends[{s}].models.{served}",
                        "the same served name maps to another catalog model on an earlier backend",
                    )
                self.serving.setdefault(served, np.zeros(n, dtype=bool))[s] = True
                self.engine_state[s, m] = ENGINE_READY  # a backend's models are resident
        self.healthy = np.ones(n, dtype=bool)
        self.own_batch = np.zeros_like(self.engine_batch)
        self.external = np.zeros_like(self.engine_batch)
        """Requests a backend reports beyond those the gateway has in flight there."""
        self._first_seen: OrderedDict[str, float] = OrderedDict()
        self._calls: OrderedDict[str, int] = OrderedDict()
        self._attained: OrderedDict[str, float] = OrderedDict()
        """Model seconds of service each workflow's answered calls have had: the simulator's
        ``attained_s``, what least-attained-service ordering (``plas``) reads."""

    @property
    def now(self) -> float:
        """Model seconds since the gateway started."""
        return (time.perf_counter() - self._t0) / self.time_scale

    def task(
        self,
        req: CompletionRequest,
        workflow: str,
        session: str,
        signals: TaskSignals = NO_SIGNALS,
    ) -> TaskRequest:
        """The request as a scheduler sees it: a one-call LLM task of its workflow, with
        the prefix identity a prefix-matching router reads off the prompt and the signals
        its client sent (the output estimate is ``max_tokens`` without one)."""
        m = self.catalog[req.model]
        now = self.now
        first = _remember(self._first_seen, workflow, now)
        k = _remember(self._calls, session, -1) + 1
        self._calls[session] = k
        prefix_tokens = min(count_tokens(req.prefix_text), req.prompt_tokens)
        est = req.max_tokens if signals.output_est is None else signals.output_est
        return TaskRequest(
            kind="llm",
            model=m,
            prompt_tokens=req.prompt_tokens,
            output_tokens_est=est,
            cpu_work=0.0,
            ext_latency_est=0.0,
            parent_servers=(),
            parent_bytes=(),
            rank=self.tables.mean_llm_time(m, req.prompt_tokens, est),
            workflow_age=now - first,
            attained_s=self._attained.get(workflow, 0.0),
            role=signals.role,
            pattern=signals.pattern,
            difficulty_hint=signals.hint,
            prefix_id=hashlib.blake2b(req.prefix_text.encode(), digest_size=8).hexdigest(),
            prefix_tokens=prefix_tokens,
            call_key=(session, k),
            context_key=(session, k - 1) if k > 0 else None,
        )

    def served(self, workflow: str, wall_s: float) -> None:
        """A call of ``workflow`` was answered in ``wall_s`` wall seconds (sent to done):
        the workflow's attained service grows by it, in model seconds, as the simulator's
        ledger adds a finished task's time."""
        _remember(self._attained, workflow, 0.0)
        self._attained[workflow] += wall_s / self.time_scale

    def decide(self, served: str, task: TaskRequest, excluded: Sequence[int] = ()) -> Decision:
        """The decision on ``task``: only healthy backends serving ``served`` are open."""
        decision = make_decision(self.tables, self, task)
        open_ = decision.mask & self.serving[served] & self.healthy
        if excluded:
            open_ = open_.copy()
            open_[list(excluded)] = False
        decision.mask = open_
        decision.finish_s = np.where(open_, decision.finish_s, np.inf)
        return decision

    def place(self, task: TaskRequest, server: int, est: float) -> None:
        """Book a request sent to ``server`` (``est``: its estimated execution, model s)."""
        m = task.model
        self.est_work[server] += est
        self.n_assigned[server] += 1
        self.own_batch[server, m] += 1
        self.engine_batch[server, m] = self.own_batch[server, m] + self.external[server, m]
        self.engine_ctx[server, m] += task.context_tokens
        self.decisions += 1
        if task.prefix_id is not None:
            self.routes.route(
                server,
                m,
                task.prefix_id,
                task.prefix_tokens,
                task.call_key,
                task.context_key,
                task.prompt_tokens + task.output_tokens_est,
            )

    def release(self, task: TaskRequest, server: int, est: float) -> None:
        """The request on ``server`` ended (answered, failed or abandoned)."""
        m = task.model
        if self.n_assigned[server] > 0:
            self.unassign(server, est)
        self.own_batch[server, m] = max(0.0, self.own_batch[server, m] - 1)
        self.engine_batch[server, m] = self.own_batch[server, m] + self.external[server, m]
        self.engine_ctx[server, m] = max(0.0, self.engine_ctx[server, m] - task.context_tokens)

    def observe(self, server: int, requests: dict[int, float]) -> None:
        """A scrape of ``server``: requests running or waiting per catalog model index."""
        self.external[server] = 0.0
        for m, count in requests.items():
            self.external[server, m] = max(0.0, count - self.own_batch[server, m])
        self.engine_batch[server] = self.own_batch[server] + self.external[server]


def _remember(box: OrderedDict[str, V], key: str, default: V) -> V:
    """``box[key]``, set to ``default`` when new; the oldest forgotten past the cap."""
    if key in box:
        box.move_to_end(key)
        return box[key]
    box[key] = default
    if len(box) > MAX_REMEMBERED:
        box.popitem(last=False)
    return default
