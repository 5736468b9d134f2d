"""The one place where scheduling features are computed.

A :class:`Decision` is what every scheduler sees: per-server estimates as numpy arrays (any
N), a feasibility mask, and fixed-width normalised feature matrices for learned policies.
It is built from two small read-only things, so that the simulator and the Ray runtime can
both supply them:

* ``ClusterTables`` (``cluster.tables``): static per-cluster arrays derived once from a
  ``ClusterSpec`` and the LLM cost model (feasibility, engine classes, decode tables);
* :class:`ClusterStateView`: the dynamic per-server state (outstanding work, engine
  batches, resident models, busy cores) at the moment of the decision;

plus the :class:`TaskRequest` of the task to place, which carries estimates only: the true
output length and external latency are never visible here.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scalesched.cluster.tables import MODEL_NAMES, ClusterTables

ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY = 0, 1, 2
"""Values of ``ClusterStateView.engine_state``; LOADING also covers waiting for GPUs."""

TASK_FEATURES = 8 + len(MODEL_NAMES)
BASE_SERVER_FEATURES = 18
"""Server features of every network trained before the cache features (the shipped
checkpoints' ``server_dim``): a network reads the first ``server_dim`` columns."""
CACHED_SHARE_FEATURE = 18
"""Server feature: the share of the task's prompt a router expects cached there (see
:class:`RouteMemory`)."""
SESSION_RESIDENT_FEATURE = 19
"""Server feature: 1 where the call this prompt extends (its session's previous call) was
routed and is still in the router's memory, else 0."""
SERVER_FEATURES = 20
"""Columns of ``Decision.server_features``: the base ones, then the two cache features."""
SERVER_DIMS = (BASE_SERVER_FEATURES, SERVER_FEATURES)
"""The ``server_dim`` a network may have: without or with the cache features."""
RELATIVE_FINISH_FEATURE = 16
"""Server feature: log1p of the estimated finish's excess over the best feasible server's,
relative to it (0 at eft's choice); learned policies may use it as a prior."""


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What a scheduler may know about the task to place (estimates, never the truth)."""

    kind: str
    """``llm`` or ``tool``."""
    model: int
    """Index into MODEL_NAMES, -1 for a tool task."""
    prompt_tokens: int
    output_tokens_est: int
    cpu_work: float
    ext_latency_est: float
    parent_servers: tuple[int, ...]
    parent_bytes: tuple[float, ...]
    rank: float
    """HEFT upward rank (mean-cost critical path to the visible exit), seconds."""
    workflow_age: float
    """Seconds since the task's workflow arrived."""
    attained_s: float = 0.0
    """Seconds of service the workflow's finished tasks have had (least attained service)."""
    role: str | None = None
    """The LLM role the task was sized by (None for tools and unsized tasks)."""
    pattern: str = ""
    """The pattern of the task's workflow."""
    difficulty_hint: float = 0.0
    """Observable, noisy signal of the true output length (LLM) or external latency (tool):
    ``ln(truth / estimate)`` plus noise, see :mod:`scalesched.workload.hints`."""
    prefix_id: str | None = None
    """The application prompt the call starts with (:mod:`scalesched.workload.sessions`):
    what a prefix-matching router reads off the prompt text. None for tools and for calls
    without a prefix identity (the rest of the prefix fields are then empty too)."""
    prefix_tokens: int = 0
    call_key: tuple[str, int] | None = None
    """(workflow name, task index): names this call's context for the calls that extend it."""
    context_key: tuple[str, int] | None = None
    """The ``call_key`` of the call whose context this prompt begins with, if any."""

    @property
    def context_tokens(self) -> int:
        """Mean context the request occupies while decoding (prompt + half the output)."""
        return self.prompt_tokens + self.output_tokens_est // 2


class ClusterStateView(Protocol):
    """Dynamic per-server state a decision reads. Arrays are (N,) or (N, len(MODEL_NAMES))."""

    @property
    def now(self) -> float: ...

    est_work: np.ndarray
    """Estimated seconds of work assigned to each server and not finished."""
    n_assigned: np.ndarray
    """Tasks assigned to each server and not finished (including those in transfer)."""
    busy_cores: np.ndarray
    cpu_backlog: np.ndarray
    """Estimated core-seconds of tool CPU work queued or running on each server."""
    tools_in_flight: np.ndarray
    """Tool tasks placed on each server whose CPU part has not finished (in transfer,
    queued or running)."""
    free_gpus: np.ndarray
    idle_gpus: np.ndarray
    """GPUs held by resident engines that have no request: free after an eviction."""
    engine_state: np.ndarray
    engine_ready_at: np.ndarray
    """When a LOADING engine is expected to be ready (absolute time)."""
    engine_batch: np.ndarray
    """Requests placed on each engine and not finished: in transfer, waiting for admission,
    prefilling or decoding."""
    engine_ctx: np.ndarray
    """Sum of the context tokens of those requests."""


class RouteView(Protocol):
    """What a router remembers of where prompts went (``scalesched.kernel.routes``): the
    tokens of a prompt it expects cached on each server, and where its session resides."""

    def cached(self, task: TaskRequest, n: int) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(slots=True, eq=False, repr=False)
class Decision:
    """Everything a scheduler may use to place one task.

    The estimate arrays are computed up front (every heuristic needs them); the normalised
    feature matrices only when a learned policy asks. A decision is valid until the task is
    placed: it reads the live state of the view. Built by ``make_decision``.
    """

    now: float
    task: TaskRequest
    mask: np.ndarray
    """(N,) bool: servers that can run the task."""
    transfer_s: np.ndarray
    """(N,) seconds until the task's inputs have arrived on each server."""
    wait_s: np.ndarray
    """(N,) estimated seconds before a server can start it (queue, GPUs, model load)."""
    load_s: np.ndarray
    """(N,) the part of ``wait_s`` that is loading the model (0 when resident)."""
    exec_s: np.ndarray
    """(N,) estimated execution seconds on each server at its current load."""
    finish_s: np.ndarray
    """(N,) estimated seconds from now to the end: max(transfer, wait) + exec."""
    imposed_s: np.ndarray
    """(N,) estimated seconds of delay the task adds to the requests already running in
    the engine it would join (a larger batch decodes every step more slowly)."""
    est_work: np.ndarray
    n_assigned: np.ndarray
    """The view's arrays of the same names (read by most heuristics)."""
    _tables: ClusterTables
    _view: ClusterStateView
    _resident: np.ndarray
    _batch: np.ndarray
    can_defer: bool = True
    """Whether the engine accepts ``Defer`` for this task (False once nothing else is
    left to happen: a deferred task is then offered for the last time)."""
    _task_features: np.ndarray | None = None
    _server_features: np.ndarray | None = None
    _at_tokens: dict[int, Decision] | None = None

    @property
    def n_servers(self) -> int:
        return int(self.mask.shape[0])

    @property
    def model_absent(self) -> np.ndarray:
        """(N,) bool: servers with no engine of the task's model, where placing it starts a
        model load (models loaded on demand); all False for a tool."""
        if self.task.kind != "llm":
            return np.zeros(self.n_servers, dtype=bool)
        return np.asarray(self._view.engine_state[:, self.task.model] == ENGINE_ABSENT)

    @property
    def model_fits_free(self) -> np.ndarray:
        """(N,) bool: servers without the task's model whose free GPUs hold its engine, where
        a load evicts nothing; all False for a tool."""
        if self.task.kind != "llm":
            return np.zeros(self.n_servers, dtype=bool)
        tp = self._tables.tp[:, self.task.model]
        return self.model_absent & (self._view.free_gpus >= tp)

    @property
    def load_waits(self) -> np.ndarray:
        """(N,) bool: servers without the task's model whose free and idle GPUs together
        cannot hold its engine, where a load waits for engines with requests to drain; all
        False for a tool."""
        if self.task.kind != "llm":
            return np.zeros(self.n_servers, dtype=bool)
        tp = self._tables.tp[:, self.task.model]
        return self.model_absent & (self._view.free_gpus + self._view.idle_gpus < tp)

    @property
    def tables(self) -> ClusterTables:
        """The cluster's static arrays (for policies that score engines themselves)."""
        return self._tables

    @property
    def view(self) -> ClusterStateView:
        """The live per-server state this decision reads."""
        return self._view

    def at_output_tokens(self, tokens: int) -> Decision:
        """The cost model's decision on the same task, state and mask, for an LLM call
        asked about at another output length (tail's quantile, hedging's spread). Its
        arrays are those ``make_decision`` builds for that length, bit for bit; the
        transfer times (which do not depend on it) are shared. Built once per length: a
        bounded network asks at the p90 for itself and for ``tail``'s scores, and the
        state does not change while a decision is open."""
        memo = self._at_tokens
        if memo is None:
            memo = self._at_tokens = {}
        again = memo.get(tokens)
        if again is None:
            task = dataclasses.replace(self.task, output_tokens_est=tokens)
            again = memo[tokens] = self._built_again(task)
        again.mask = self.mask
        return again

    def _built_again(self, task: TaskRequest) -> Decision:
        """``make_decision`` for ``task`` on this decision's state."""
        return make_decision(self._tables, self._view, task, transfer=self.transfer_s)

    @property
    def task_features(self) -> np.ndarray:
        """(TASK_FEATURES,) normalised features of the task."""
        if self._task_features is None:
            self._task_features = _task_features(self.task)
        return self._task_features

    @property
    def server_features(self) -> np.ndarray:
        """(N, SERVER_FEATURES) normalised features of each server for this task."""
        if self._server_features is None:
            self._server_features = self._build_server_features()
        return self._server_features

    @server_features.setter
    def server_features(self, features: np.ndarray) -> None:
        """Show a learned policy other server features for this decision: for ablations
        (say, the cache columns zeroed) without a second feature builder."""
        expected = (self.n_servers, SERVER_FEATURES)
        if features.shape != expected:
            raise ValueError(f"server features must be {expected}, got {features.shape}")
        self._server_features = features

    def _build_server_features(self) -> np.ndarray:
        t, v, mask = self._tables, self._view, self.mask
        f = np.empty((t.n, SERVER_FEATURES))
        self._cache_features(f)
        f[:, :6] = t.server_static
        f[:, 8] = v.busy_cores / t.cores
        f[:, 9] = v.free_gpus / np.maximum(t.gpus, 1)
        f[:, 10] = self._resident
        # The log-scaled columns, 0 where masked, stacked so that one log1p and one division
        # do them all (log1p is elementwise: the same values as one call per column; 3-5 us
        # less per decision at N = 17-256, measured). The last row is relative to the
        # best feasible server: scale-free, so it means the same at any N and for short and
        # long tasks alike (as the relative finish column).
        logged = np.zeros((8, t.n))
        logged[0], logged[1], logged[2] = v.est_work, v.n_assigned, self._batch
        np.copyto(logged[3], self.exec_s, where=mask)
        np.copyto(logged[4], self.wait_s, where=mask)
        logged[5] = self.transfer_s
        np.copyto(logged[6], self.finish_s, where=mask)
        best_exec = float(self.exec_s[mask].min())
        np.subtract(self.exec_s, best_exec, out=logged[7], where=mask)
        logged[7] /= best_exec + 1e-3
        np.log1p(logged, out=logged)
        logged[:7] /= 5
        f[:, 6:8] = logged[0:2].T
        f[:, 11:16] = logged[2:7].T
        f[:, RELATIVE_FINISH_FEATURE] = np.where(mask, relative_excess(self.finish_s, mask), 0.0)
        f[:, 17] = logged[7]
        return f

    def _cache_features(self, f: np.ndarray) -> None:
        """The cache columns, from the router's memory the view keeps (``routes``, a
        :class:`RouteView`; views without one, and tasks without a prefix identity,
        get zeros).

        Why these two: prefill skips what the engine holds, and placement decides most
        cache misses (docs/cache.md: 41-78% of re-entries land away from their context
        under eft and least_loaded), yet the base features cannot tell the server holding a
        session's context from any other. (a) The share of the prompt expected cached,
        in [0, 1], is what a placement there saves in prefill and KV memory; (b) session
        residency, 0/1, separates a session's own context (cached output, a long prefix)
        from an application prompt that many servers hold. An engine not resident (absent)
        lost its cache with its unloading, so both are 0 there."""
        f[:, CACHED_SHARE_FEATURE:] = 0.0
        task = self.task
        routes: RouteView | None = getattr(self._view, "routes", None)
        if task.prefix_id is None or task.kind != "llm" or routes is None:
            return
        tokens, resident = routes.cached(task, self._tables.n)
        live = ~self.model_absent
        f[:, CACHED_SHARE_FEATURE] = np.where(live, tokens, 0.0) / max(task.prompt_tokens, 1)
        f[:, SESSION_RESIDENT_FEATURE] = np.where(live, resident, 0.0)


def transfer_times(tables: ClusterTables, task: TaskRequest) -> np.ndarray:
    """Seconds for the task's inputs to reach each server (0 on the parents' own server)."""
    out: np.ndarray | None = None
    for src, nbytes in zip(task.parent_servers, task.parent_bytes, strict=True):
        if nbytes <= 0:
            continue
        t = tables.latency_s + nbytes / tables.bandwidth_from(src)
        t[src] = 0.0
        if out is None:
            out = t  # the max of zeros and t (t >= 0): t itself, bit for bit
        else:
            np.maximum(out, t, out=out)
    return np.zeros(tables.n) if out is None else out


def relative_excess(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """log1p of each value's excess over the best (smallest) masked one, relative to it: 0 at
    the best. Meaningful on the masked entries only."""
    best = float(values[mask].min())
    return np.log1p((values - best) / (best + 1e-3))


def _model_load_wait(
    view: ClusterStateView, load_s: np.ndarray, absent: np.ndarray, state: np.ndarray, m: int
) -> np.ndarray:
    """(N,) seconds until model ``m`` is ready on each server: a whole load where it is
    absent, none where it is ready, what is left where it is loading. A simulated load ends
    exactly at ``engine_ready_at``; an engine past it is still waiting (queued for its
    server's GPUs, ready_at the guess made then; live, a load running late): estimated as
    a whole load plus the server's mean remaining work per task, that guess refreshed."""
    load = np.where(absent, load_s, 0.0)
    loading = state == ENGINE_LOADING
    if loading.any():
        left = view.engine_ready_at[loading, m] - view.now
        queued = load_s[loading] + view.est_work[loading] / np.maximum(view.n_assigned[loading], 1)
        load[loading] = np.where(left < 0.0, queued, left)
    return load


def make_decision(
    tables: ClusterTables,
    view: ClusterStateView,
    task: TaskRequest,
    *,
    transfer: np.ndarray | None = None,
) -> Decision:
    """Estimate, for every server at once, when the task could start and finish there.

    Hot: one call per placement. The per-model columns and the per-class prefill and
    admission figures come precomputed or cached from ``tables``; every array is the same,
    bit for bit, as computing them here (the same operations on the same doubles).
    ``transfer``: the task's ``transfer_times``, where the caller has them already."""
    if transfer is None:
        transfer = transfer_times(tables, task)
    if task.kind == "llm":
        m = task.model
        cols = tables._model_cols[m]
        mask, kk = cols.mask, cols.kk
        state = view.engine_state[:, m]
        batch = view.engine_batch[:, m]
        # Requests an engine runs at once: the batch cap or the KV memory, whichever binds
        # first for requests like this one; the rest queue for admission.
        need = task.prompt_tokens + task.output_tokens_est
        slots = tables.slots_by_class(need if need > 1 else 1).take(kk)
        batch1 = batch + 1
        running = np.minimum(batch1, slots).astype(np.int64)
        others = running - 1
        context = task.context_tokens
        ctx = view.engine_ctx[:, m] / np.maximum(batch, 1) * others + context
        attn = tables.decode_attn.take(kk)
        row = cols.base + running
        step = tables._lin_flat.take(row) + attn * ctx
        # Joining a running batch slows each of its (running - 1) requests by the step-time
        # increase, over about half of the newcomer's output (they overlap that long on
        # average); a request that queues for admission slows no running one.
        increase = tables._increase_flat.take(row) + attn * context
        out_est = task.output_tokens_est
        imposed = (others * (batch < slots)) * increase * (out_est / 2)
        exec_s = tables.prefill_by_class(m, task.prompt_tokens).take(kk) + out_est * step
        # Behind a full engine the request waits about one batch time per `slots` ahead.
        wait = np.maximum(batch1 - slots, 0) / slots * exec_s
        absent = state == ENGINE_ABSENT
        load = _model_load_wait(view, cols.load, absent, state, m)
        wait += load
        no_gpus = absent & (view.free_gpus + view.idle_gpus < cols.tp)
        if no_gpus.any():
            wait[no_gpus] += view.est_work[no_gpus] / np.maximum(view.n_assigned[no_gpus], 1)
        if cols.masked_out is not None:
            exec_s[cols.masked_out] = np.inf
        resident = (state == ENGINE_READY).astype(np.float64)
    else:
        mask = tables.all_servers
        exec_s = task.cpu_work / tables.core_speed + task.ext_latency_est
        # Tools ahead of this one beyond the free cores, each of the mean placed length,
        # shared by the cores (placed tools in transfer count: they will take a core).
        inflight = view.tools_in_flight
        ahead = np.maximum(inflight + 1 - tables.cores, 0.0)
        wait = ahead * (view.cpu_backlog / np.maximum(inflight, 1.0)) / tables.cores
        load = batch = resident = imposed = tables.zeros
    return Decision(
        now=view.now,
        task=task,
        mask=mask,
        transfer_s=transfer,
        wait_s=wait,
        load_s=load,
        exec_s=exec_s,
        finish_s=np.maximum(transfer, wait) + exec_s,
        imposed_s=imposed,
        est_work=view.est_work,
        n_assigned=view.n_assigned,
        _tables=tables,
        _view=view,
        _resident=resident,
        _batch=batch,
    )


def _task_features(task: TaskRequest) -> np.ndarray:
    f = np.zeros(TASK_FEATURES)
    f[0] = 1.0 if task.kind == "llm" else 0.0
    if task.model >= 0:
        f[1 + task.model] = 1.0  # one-hot over the (currently four) catalog models
    base = 1 + len(MODEL_NAMES)
    f[base] = math.log1p(task.prompt_tokens) / 8
    f[base + 1] = math.log1p(task.output_tokens_est) / 8
    f[base + 2] = math.log1p(task.cpu_work) / 3
    f[base + 3] = math.log1p(task.ext_latency_est) / 3
    f[base + 4] = math.log1p(task.rank) / 5
    f[base + 5] = math.log1p(task.workflow_age) / 5
    f[base + 6] = math.log1p(sum(task.parent_bytes)) / 20
    return f
