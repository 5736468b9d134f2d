"""The runtime's ledger of a run, as the feature module reads it.

``RuntimeView`` is the run's ``RunLedger`` (arrivals, readiness, completion, trace, the
per-server arrays behind ``ClusterStateView``, which servers are alive: kept once, shared
with the simulator) plus what only a live cluster has: a wall clock read in model seconds
(wall seconds since the start divided by the time scale, so the estimates of
``make_decision`` compare with it directly), and engine residency as the nodes report it in
the snapshot each result carries. What the driver placed is booked as in the simulator;
what finished is released in one step (the simulator releases a task's parts as its events
happen).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from scalesched.cluster.tables import MODEL_INDEX, ClusterTables
from scalesched.decision.features import ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY
from scalesched.kernel.ledger import RunLedger
from scalesched.workload.instance import Job


class RuntimeView(RunLedger):
    """A run on a live cluster: its ledger and the ``ClusterStateView`` decisions read."""

    def __init__(
        self,
        tables: ClusterTables,
        time_scale: float,
        jobs: Sequence[Job] = (),
        *,
        record_trace: bool = False,
    ) -> None:
        super().__init__(tables, jobs, record_trace=record_trace)
        self.time_scale = float(time_scale)
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
    def book(self, x: int, server: int, est: float) -> None:
        """Task ``x`` was sent to ``server`` (``est``: estimated execution, model s). Cores
        count as busy up to the server's cores; an engine the node has not reported yet is
        taken to be loading from now."""
        super().book(x, server, est)
        task = self.tasks.task(x)
        if task.kind == "tool":
            self.busy_cores[server] = min(self.tools_in_flight[server], self.tables.cores[server])
            return
        m = MODEL_INDEX[task.model or ""]
        if self.engine_state[server, m] == ENGINE_ABSENT:
            self.engine_state[server, m] = ENGINE_LOADING
            self.engine_ready_at[server, m] = self.now + self.tables.load_s[server, m]
            tp = self.tables.tp[server, m]
            if self.free_gpus[server] >= tp:
                self.free_gpus[server] -= tp

    def unbook(self, x: int, server: int, est: float) -> None:
        """Task ``x`` placed on ``server`` finished, failed, was cancelled or lost."""
        if self.n_assigned[server] > 0:
            self.unassign(server, est)
        task = self.tasks.task(x)
        if task.kind == "tool":
            cpu_s = task.cpu_work / self._speed[server]
            self.cpu_backlog[server] = max(0.0, self.cpu_backlog[server] - cpu_s)
            self.tools_in_flight[server] = max(0.0, self.tools_in_flight[server] - 1)
            self.busy_cores[server] = min(self.tools_in_flight[server], self.tables.cores[server])
            return
        m = MODEL_INDEX[task.model or ""]
        ctx = task.prompt_tokens + task.output_tokens_est // 2
        self.engine_batch[server, m] = max(0.0, self.engine_batch[server, m] - 1)
        self.engine_ctx[server, m] = max(0.0, self.engine_ctx[server, m] - ctx)

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
