"""The runtime's own bookkeeping of the cluster, as the feature module reads it.

``RuntimeView`` implements ``ClusterStateView`` with the arrays the simulator keeps, filled
from what the driver itself did and heard: it counts what it placed and what finished
(outstanding work, tasks, tool backlog, engine batches and contexts) and takes the engines'
residency and GPU counts from the snapshot each node returns with every result. Time is in
model seconds: wall seconds since the start divided by the time scale, so the estimates of
``make_decision`` (model seconds) compare with it directly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from scalesched.decision.features import (
    ENGINE_ABSENT,
    ENGINE_LOADING,
    ENGINE_READY,
    MODEL_NAMES,
    ClusterTables,
)


class RuntimeView:
    """Per-server state of a live cluster (the ``ClusterStateView`` protocol)."""

    def __init__(self, tables: ClusterTables, time_scale: float) -> None:
        n, n_models = tables.n, len(MODEL_NAMES)
        self.tables = tables
        self.time_scale = float(time_scale)
        self.est_work = np.zeros(n)
        self.n_assigned = np.zeros(n)
        self.busy_cores = np.zeros(n)
        self.cpu_backlog = np.zeros(n)
        self.free_gpus = tables.gpus.copy()
        self.idle_gpus = np.zeros(n)
        self.engine_state = np.zeros((n, n_models), dtype=np.int8)
        self.engine_ready_at = np.zeros((n, n_models))
        self.engine_batch = np.zeros((n, n_models))
        self.engine_ctx = np.zeros((n, n_models))
        self.tools_in_flight = np.zeros(n)
        self.alive = np.ones(n, dtype=bool)
        if tables.pinned:  # a deployment: every replica is resident from the start
            self.engine_state[tables.feasible] = ENGINE_READY
            self.free_gpus -= tables.tp.sum(axis=1)
        self.start()

    def start(self) -> None:
        """Set time zero (model time 0 is this instant)."""
        self._t0 = time.perf_counter()
        self.wall0 = time.time()

    @property
    def now(self) -> float:
        """Model seconds since the start."""
        return (time.perf_counter() - self._t0) / self.time_scale

    def model_time(self, wall: float) -> float:
        """A ``time.time()`` stamp (from any node of the cluster) in model seconds."""
        return (wall - self.wall0) / self.time_scale

    # -- bookkeeping -------------------------------------------------------------------
    def placed(
        self, server: int, est: float, kind: str, model: int, cpu_s: float, ctx: int
    ) -> None:
        """A task was sent to ``server``; ``est`` is its estimated execution (model s)."""
        self.est_work[server] += est
        self.n_assigned[server] += 1
        if kind == "tool":
            self.cpu_backlog[server] += cpu_s
            self.tools_in_flight[server] += 1
            self.busy_cores[server] = min(self.tools_in_flight[server], self.tables.cores[server])
            return
        self.engine_batch[server, model] += 1
        self.engine_ctx[server, model] += ctx
        if self.engine_state[server, model] == ENGINE_ABSENT:
            # Optimistic until the node reports: the engine starts loading now.
            self.engine_state[server, model] = ENGINE_LOADING
            self.engine_ready_at[server, model] = self.now + self.tables.load_s[server, model]
            tp = self.tables.tp[server, model]
            if self.free_gpus[server] >= tp:
                self.free_gpus[server] -= tp

    def released(
        self, server: int, est: float, kind: str, model: int, cpu_s: float, ctx: int
    ) -> None:
        """A task placed on ``server`` finished, failed or was lost."""
        self.n_assigned[server] = max(0.0, self.n_assigned[server] - 1)
        self.est_work[server] = self.est_work[server] - est if self.n_assigned[server] > 0 else 0.0
        if kind == "tool":
            self.cpu_backlog[server] = max(0.0, self.cpu_backlog[server] - cpu_s)
            self.tools_in_flight[server] = max(0.0, self.tools_in_flight[server] - 1)
            self.busy_cores[server] = min(self.tools_in_flight[server], self.tables.cores[server])
            return
        self.engine_batch[server, model] = max(0.0, self.engine_batch[server, model] - 1)
        self.engine_ctx[server, model] = max(0.0, self.engine_ctx[server, model] - ctx)

    def update_engines(
        self, server: int, states: Sequence[int], free_gpus: float, idle_gpus: float
    ) -> None:
        """Take a node's snapshot; engines with requests in flight that the node has not
        seen yet stay LOADING (the node reports ABSENT for them)."""
        row = np.asarray(states, dtype=np.int8)
        pending = (row == ENGINE_ABSENT) & (self.engine_batch[server] > 0)
        row[pending] = ENGINE_LOADING
        self.engine_state[server] = row
        self.free_gpus[server] = free_gpus
        self.idle_gpus[server] = idle_gpus

    def mark_dead(self, server: int) -> None:
        self.alive[server] = False
        self.est_work[server] = 0.0
        self.n_assigned[server] = 0.0
        self.cpu_backlog[server] = 0.0
        self.busy_cores[server] = 0.0
        self.tools_in_flight[server] = 0.0
        self.engine_batch[server] = 0.0
        self.engine_ctx[server] = 0.0
        self.engine_state[server] = ENGINE_ABSENT
        self.free_gpus[server] = 0.0
        self.idle_gpus[server] = 0.0
