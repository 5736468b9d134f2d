"""Periodic re-planning: a planned run whose deployment follows the arrival rate.

A deployment planned for one rate is too small when the load rises and holds idle GPUs when
it falls. ``Replanner`` wraps any scheduler: every ``period_s`` it measures the arrival rate
over the last ``window_s``, plans for it (``plan_for``: the planner, cached), and when the
plan differs from the one running it sends a ``Redeploy`` with that answer. The simulator
carries it out group by group (``scalesched.decision.redeploy``): groups that arrive load
for the model's load time on GPUs they hold meanwhile, groups that leave drain first. The
placement policy itself is unchanged; it sees the new deployment from the next decision.

Rates are planned for on a geometric grid (``rate_step``): noise in a short window then
re-plans only when the rate moved a step, and every rate of the grid is planned once.
``min_rate`` floors the grid: a window with no arrival still keeps a plan that serves every
model. What the re-planner measures is what a real controller sees: arrivals, from the
decisions (a workflow's first task is placed at its arrival).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from scalesched.cluster.deployment import (
    Deployment,
    Replica,
    deployment_from_dict,
    deployment_to_dict,
)
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.actions import Action, Defer, Hedge, Place
from scalesched.decision.features import Decision
from scalesched.decision.redeploy import Redeploy, deployment_diff
from scalesched.decision.scheduler import ReadyOrder, Scheduler
from scalesched.errors import InputError

_SRC = "replan"


@dataclass(frozen=True)
class ReplanOptions:
    """When and for what the deployment is re-planned."""

    period_s: float = 30.0
    """Seconds between two looks at the rate."""
    window_s: float | None = None
    """Seconds of arrivals the rate is measured over (None: ``period_s``)."""
    hold_s: float = 120.0
    """Scale-down delay: the plan is for the highest rate measured over this many seconds
    (Kubernetes' downscale stabilisation window): a lull shorter than this keeps the plan,
    so a burst after it finds the replicas still loaded (calls queued on a small plan's
    engines stay there when new replicas come up)."""
    headroom: float = 1.0
    """The plan is made for this multiple of the measured rate."""
    rate_step: float = 1.25
    """Rates planned for are ``min_rate`` times a power of this."""
    min_rate: float = 0.1
    """The least rate planned for, workflows/s."""

    def __post_init__(self) -> None:
        checks = (
            ("period_s", self.period_s, self.period_s > 0),
            ("window_s", self.window_s, self.window_s is None or self.window_s > 0),
            ("hold_s", self.hold_s, self.hold_s >= 0),
            ("headroom", self.headroom, self.headroom > 0),
            ("rate_step", self.rate_step, self.rate_step > 1),
            ("min_rate", self.min_rate, self.min_rate > 0),
        )
        for field, value, ok in checks:
            if not ok or (value is not None and not math.isfinite(value)):
                bound = {"rate_step": "> 1", "hold_s": ">= 0"}.get(field, "> 0")
                raise InputError(_SRC, field, f"must be a finite number {bound}, got {value!r}")

    @property
    def window(self) -> float:
        return self.period_s if self.window_s is None else self.window_s

    def grid_rate(self, rate: float) -> float:
        """The grid rate a measured ``rate`` is planned for: the least grid point at or
        above ``headroom`` times it."""
        want = self.headroom * rate
        if want <= self.min_rate:
            return self.min_rate
        k = math.ceil(math.log(want / self.min_rate) / math.log(self.rate_step) - 1e-9)
        return float(self.min_rate * self.rate_step**k)


class Replanner:
    """``inner`` placing every task, on a deployment re-planned every ``period_s`` for the
    rate measured over the last window (module docstring). ``plan_for(rate)`` gives the
    deployment for a rate (``planner``); the run starts on ``start``, planned for ``rate``.
    Each new plan is ``align``-ed to the one running before it is diffed."""

    def __init__(
        self,
        inner: Scheduler,
        plan_for: Callable[[float], Deployment],
        start: Deployment,
        rate: float,
        options: ReplanOptions | None = None,
    ) -> None:
        self.inner = inner
        self.plan_for = plan_for
        self.options = options or ReplanOptions()
        self.name = f"{inner.name}+replan"
        self.ready_order: ReadyOrder = inner.ready_order
        self.start, self.start_rate = start, rate
        self._tables: dict[frozenset[Replica], ClusterTables] = {}
        self.reset(0)

    def reset(self, seed: int) -> None:
        self.inner.reset(seed)
        self.arrivals: deque[float] = deque()
        self.last_arrival = -math.inf
        self.next_at = self.options.period_s
        self.planned_rate = self.start_rate
        self.current = self.start
        self.recent: deque[tuple[float, float]] = deque()
        """(time, grid rate) of the looks within ``hold_s``."""
        self.history: list[tuple[float, float, float]] = []
        """(time, measured rate, rate planned for) of every re-plan that changed the
        deployment."""

    def supports(self, n_servers: int) -> bool:
        return self.inner.supports(n_servers)

    def unsupported_reason(self, n_servers: int) -> str | None:
        return self.inner.unsupported_reason(n_servers)

    def observed_rate(self, now: float) -> float:
        """Arrivals per second over the last window."""
        window = self.options.window
        while self.arrivals and self.arrivals[0] <= now - window:
            self.arrivals.popleft()
        return len(self.arrivals) / min(window, max(now, 1e-9))

    def select(self, decision: Decision) -> int | Action:
        now = decision.now
        arrived = now - decision.task.workflow_age
        if arrived > self.last_arrival + 1e-9:  # a workflow's first decision: its arrival
            self.last_arrival = arrived
            self.arrivals.append(arrived)
        answer = self.inner.select(decision)
        if now < self.next_at:
            return answer
        while self.next_at <= now:
            self.next_at += self.options.period_s
        measured = self.observed_rate(now)
        self.recent.append((now, self.options.grid_rate(measured)))
        while self.recent[0][0] < now - self.options.hold_s:
            self.recent.popleft()
        rate = max(r for _, r in self.recent)
        if rate == self.planned_rate:
            return answer
        self.planned_rate = rate
        spec = decision.tables.spec
        aligned = align(self.plan_for(rate), self.current, spec)
        key = frozenset(aligned.replicas)
        if key not in self._tables:
            self._tables[key] = ClusterTables(spec, aligned)
        tables = self._tables[key]
        if deployment_diff(decision.tables, tables).empty:
            return answer
        self.current = aligned
        self.history.append((now, measured, rate))
        return with_request(answer, Redeploy(tables))


def with_request(answer: int | Action, request: Redeploy) -> Action:
    """``answer`` carrying ``request`` too."""
    if isinstance(answer, Place | Hedge | Defer):
        return dataclasses.replace(answer, loads=(*answer.loads, request))
    return Place(int(answer), loads=(request,))


def _server_class(spec: ClusterSpec, s: int) -> tuple[object, ...]:
    """What makes two servers interchangeable: everything but the name."""
    server = spec.servers[s]
    return dataclasses.astuple(dataclasses.replace(server, name=""))


def _layout(deployment: Deployment, index: dict[str, int]) -> dict[int, set[Replica]]:
    """Per server index, its replicas with the server name left out (comparable across
    servers)."""
    out: dict[int, set[Replica]] = {}
    for r in deployment.replicas:
        out.setdefault(index[r.server], set()).add(dataclasses.replace(r, server=""))
    return out


def align(deployment: Deployment, current: Deployment, spec: ClusterSpec) -> Deployment:
    """``deployment`` with its servers permuted among interchangeable ones (same type and
    hardware) so that as many replicas as can stay where ``current`` has them: the planner
    breaks ties between identical servers by their order, so two plans that differ in one
    replica may otherwise swap whole servers, and every swapped group would be unloaded
    and loaded again for nothing."""
    index = {s.name: i for i, s in enumerate(spec.servers)}
    new, cur = _layout(deployment, index), _layout(current, index)
    classes: dict[tuple[object, ...], list[int]] = {}
    for s in range(len(spec.servers)):
        classes.setdefault(_server_class(spec, s), []).append(s)
    rename: dict[int, int] = {}
    for members in classes.values():
        pairs = sorted(
            ((len(new.get(a, set()) & cur.get(b, set())), a, b) for a in members for b in members),
            key=lambda p: (-p[0], p[1], p[2]),
        )
        taken_new: set[int] = set()
        taken_cur: set[int] = set()
        for _, a, b in pairs:
            if a not in taken_new and b not in taken_cur:
                rename[a] = b
                taken_new.add(a)
                taken_cur.add(b)
    replicas = [
        dataclasses.replace(r, server=spec.servers[rename[index[r.server]]].name)
        for r in deployment.replicas
    ]
    data = deployment_to_dict(deployment.name, spec.name, replicas)
    return deployment_from_dict(data, spec, "replan")


def planner(
    spec: ClusterSpec, workload: str, *, slo_mean_s: float | None = None
) -> Callable[[float], Deployment]:
    """``plan_for`` for a ``Replanner``: the planner's deployment of ``spec`` for
    ``workload`` at a rate (``runs.world.plan_deployment``, cached there); with
    ``slo_mean_s``, the smallest plan meeting that predicted mean."""
    from scalesched.runs.world import plan_deployment

    def plan_for(rate: float) -> Deployment:
        return plan_deployment(spec, workload, rate, slo_mean_s=slo_mean_s)

    return plan_for
