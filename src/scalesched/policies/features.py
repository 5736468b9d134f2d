"""The one place where scheduling features are computed.

A :class:`Decision` is what every scheduler sees: per-server estimates as numpy arrays (any
N), a feasibility mask, and fixed-width normalised feature matrices for learned policies.
It is built from two small read-only things, so that the simulator and the Ray runtime can
both supply them:

* :class:`ClusterTables`: static per-cluster arrays derived once from a ``ClusterSpec``
  and the LLM cost model (feasibility, engine classes, decode tables, load times);
* :class:`ClusterStateView`: the dynamic per-server state (outstanding work, engine
  batches, resident models, busy cores) at the moment of the decision;

plus the :class:`TaskRequest` of the task to place, which carries estimates only: the true
output length and external latency are never visible here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import MODELS, engine_perf, tensor_parallel_degree

MODEL_NAMES: tuple[str, ...] = tuple(sorted(MODELS))
"""Column order of every per-model array."""
MODEL_INDEX: dict[str, int] = {name: i for i, name in enumerate(MODEL_NAMES)}

ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY = 0, 1, 2
"""Values of ``ClusterStateView.engine_state``; LOADING also covers waiting for GPUs."""

MAX_BATCH_TABLE = 1024
"""Decode tables cover batch sizes 0..MAX_BATCH_TABLE (engines cap their batch below it)."""

TASK_FEATURES = 8 + len(MODEL_NAMES)
SERVER_FEATURES = 16


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
    free_gpus: np.ndarray
    idle_gpus: np.ndarray
    """GPUs held by resident engines that have no request: free after an eviction."""
    engine_state: np.ndarray
    engine_ready_at: np.ndarray
    """When a LOADING engine is expected to be ready (absolute time)."""
    engine_batch: np.ndarray
    """Requests in each engine: decoding, prefilling or waiting for admission."""
    engine_ctx: np.ndarray
    """Sum of the context tokens of those requests."""


class ClusterTables:
    """Static arrays of one cluster, built once and shared by every decision."""

    def __init__(self, spec: ClusterSpec) -> None:
        servers = spec.servers
        n = len(servers)
        if n == 0:
            raise ValueError("a cluster needs at least one server")
        self.spec = spec
        self.n = n
        self.names = [s.name for s in servers]
        self.gpus = np.array([s.gpus for s in servers], dtype=np.float64)
        self.cores = np.array([s.cpu_cores for s in servers], dtype=np.float64)
        self.core_speed = np.array([s.core_speed for s in servers], dtype=np.float64)
        self.nic_bytes_per_s = np.array([s.nic_gbps * 1e9 / 8 for s in servers])
        self.latency_s = spec.network_latency_s
        self.max_core_speed = float(self.core_speed.max())
        self.mean_core_speed = float(self.core_speed.mean())

        n_models = len(MODEL_NAMES)
        self.tp = np.zeros((n, n_models), dtype=np.int64)
        self.engine_class = np.full((n, n_models), -1, dtype=np.int64)
        self.load_s = np.zeros((n, n_models))
        classes: dict[tuple[str, str, int], int] = {}
        self.engines = []
        for si, server in enumerate(servers):
            for mi, model in enumerate(MODEL_NAMES):
                if server.gpu_type is None or server.gpus <= 0:
                    continue
                tp = tensor_parallel_degree(model, server.gpu_type, server.gpus)
                if tp is None:
                    continue
                key = (model, server.gpu_type, tp)
                if key not in classes:
                    classes[key] = len(self.engines)
                    self.engines.append(engine_perf(model, server.gpu_type, tp))
                k = classes[key]
                self.tp[si, mi] = tp
                self.engine_class[si, mi] = k
                self.load_s[si, mi] = self.engines[k].load_s(server.load_gbs)
        self.feasible = self.engine_class >= 0
        self.feasible_any = self.feasible.any(axis=0)
        # Decode step = lin[k, batch] + attn[k] * context_tokens (the cost model is linear in
        # context by construction); tabulate once so decisions index instead of calling.
        n_classes = max(1, len(self.engines))
        self.decode_lin = np.zeros((n_classes, MAX_BATCH_TABLE + 2))
        self.decode_attn = np.zeros(n_classes)
        for k, eng in enumerate(self.engines):
            base = eng.decode_step_s(1, 0)
            self.decode_attn[k] = (eng.decode_step_s(1, 1_000_000) - base) / 1_000_000
            self.decode_lin[k, 1:] = [
                eng.decode_step_s(b, 0) for b in range(1, MAX_BATCH_TABLE + 2)
            ]
        self.max_batch = np.array([e.max_batch for e in self.engines] or [1])
        self.kv_capacity = np.array([e.kv_capacity_tokens for e in self.engines] or [1])
        self.server_static = _static_server_features(self)
        self._mean_cost_cache: dict[tuple[int, int, int], float] = {}

    # -- costs with no contention: used for ranks, lower bounds and capacity ------------
    def llm_time_alone(self, model: int, prompt: int, output: int) -> np.ndarray:
        """Seconds the request takes alone on each server (inf where it cannot run)."""
        times = np.full(self.n, np.inf)
        ctx = prompt + output // 2
        for k, eng in enumerate(self.engines):
            if eng.model != MODEL_NAMES[model]:
                continue
            t = eng.prefill_s(prompt) + output * (
                self.decode_lin[k, 1] + self.decode_attn[k] * ctx
            )
            times[self.engine_class[:, model] == k] = t
        return times

    def fastest_llm_time(self, model: int, prompt: int, output: int) -> float:
        return float(self.llm_time_alone(model, prompt, output).min())

    def mean_llm_time(self, model: int, prompt: int, output: int) -> float:
        """HEFT's mean execution cost over the servers that can run the model."""
        key = (model, prompt, output)
        cached = self._mean_cost_cache.get(key)
        if cached is None:
            times = self.llm_time_alone(model, prompt, output)
            finite = times[np.isfinite(times)]
            cached = float(finite.mean()) if finite.size else math.inf
            if len(self._mean_cost_cache) < 100_000:
                self._mean_cost_cache[key] = cached
        return cached

    def mean_transfer_s(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        return self.latency_s + nbytes / float(self.nic_bytes_per_s.mean())


def _static_server_features(t: ClusterTables) -> np.ndarray:
    """Per-server features that never change, scaled to O(1)."""
    from scalesched.cluster.perf import GPU_TYPES

    feats = np.zeros((t.n, 6))
    for i, server in enumerate(t.spec.servers):
        gpu = GPU_TYPES.get(server.gpu_type) if server.gpu_type else None
        feats[i, 0] = 1.0 if gpu is not None else 0.0
        feats[i, 1] = math.log2(1 + server.gpus) / 3
        feats[i, 2] = (gpu.memory_gb * server.gpus / 320) if gpu else 0.0
        feats[i, 3] = (gpu.tflops * server.gpus / 4000) if gpu else 0.0
        feats[i, 4] = server.cpu_cores / 64
        feats[i, 5] = server.core_speed
    return feats


@dataclass(slots=True)
class Decision:
    """Everything a scheduler may use to place one task."""

    now: float
    task: TaskRequest
    mask: np.ndarray
    """(N,) bool: servers that can run the task."""
    transfer_s: np.ndarray
    """(N,) seconds until the task's inputs have arrived on each server."""
    wait_s: np.ndarray
    """(N,) estimated seconds before the server can start it (queue, GPUs, model load)."""
    load_s: np.ndarray
    """(N,) the part of ``wait_s`` that is loading the model (0 when resident)."""
    exec_s: np.ndarray
    """(N,) estimated execution seconds on each server at its current load."""
    finish_s: np.ndarray
    """(N,) estimated seconds from now until the task finishes: max(transfer, wait) + exec."""
    est_work: np.ndarray
    n_assigned: np.ndarray
    task_features: np.ndarray
    """(TASK_FEATURES,) normalised features of the task."""
    server_features: np.ndarray
    """(N, SERVER_FEATURES) normalised features of each server for this task."""

    @property
    def n_servers(self) -> int:
        return int(self.mask.shape[0])


def transfer_times(tables: ClusterTables, task: TaskRequest) -> np.ndarray:
    """Seconds for the task's inputs to reach each server (0 on the parents' own server)."""
    out = np.zeros(tables.n)
    for src, nbytes in zip(task.parent_servers, task.parent_bytes, strict=True):
        if nbytes <= 0:
            continue
        bw = np.minimum(tables.nic_bytes_per_s, tables.nic_bytes_per_s[src])
        t = tables.latency_s + nbytes / bw
        t[src] = 0.0
        np.maximum(out, t, out=out)
    return out


def make_decision(tables: ClusterTables, view: ClusterStateView, task: TaskRequest) -> Decision:
    """Estimate, for every server at once, when the task could start and finish there."""
    n = tables.n
    transfer = transfer_times(tables, task)
    if task.kind == "llm":
        m = task.model
        mask = tables.feasible[:, m].copy()
        klass = tables.engine_class[:, m]
        kk = np.where(mask, klass, 0)
        state = view.engine_state[:, m]
        batch = view.engine_batch[:, m]
        # Requests the engine can run at once: the batch cap or the KV memory, whichever
        # binds first for requests like this one; the rest queue for admission.
        need = task.prompt_tokens + task.output_tokens_est
        slots = np.clip(tables.kv_capacity[kk] // max(need, 1), 1, tables.max_batch[kk])
        running = np.minimum(batch + 1, slots).astype(np.int64)
        mean_ctx = view.engine_ctx[:, m] / np.maximum(batch, 1)
        ctx = mean_ctx * (running - 1) + task.context_tokens
        step = tables.decode_lin[kk, running] + tables.decode_attn[kk] * ctx
        prefill = np.zeros(n)
        for k in np.unique(kk[mask]):
            prefill[kk == k] = tables.engines[int(k)].prefill_s(task.prompt_tokens)
        exec_s = prefill + task.output_tokens_est * step
        # Behind a full engine the request waits about one batch time per `slots` ahead.
        queued_ahead = np.maximum(batch + 1 - slots, 0)
        queue_wait = queued_ahead / slots * exec_s
        load = np.where(state == ENGINE_ABSENT, tables.load_s[:, m], 0.0)
        loading = state == ENGINE_LOADING
        load = np.where(loading, np.maximum(view.engine_ready_at[:, m] - view.now, 0.0), load)
        no_gpus = (state == ENGINE_ABSENT) & (
            view.free_gpus + view.idle_gpus < tables.tp[:, m]
        )
        backlog = view.est_work / np.maximum(view.n_assigned, 1)
        wait = load + queue_wait + np.where(no_gpus, backlog, 0.0)
        exec_s = np.where(mask, exec_s, np.inf)
        resident = (state == ENGINE_READY).astype(np.float64)
    else:
        mask = np.ones(n, dtype=bool)
        exec_s = task.cpu_work / tables.core_speed + task.ext_latency_est
        busy = view.busy_cores >= tables.cores
        wait = np.where(busy, view.cpu_backlog / tables.cores, 0.0)
        load = np.zeros(n)
        batch = np.zeros(n)
        resident = np.zeros(n)
    finish = np.maximum(transfer, wait) + exec_s
    task_feats = _task_features(task)
    server_feats = np.empty((n, SERVER_FEATURES))
    server_feats[:, :6] = tables.server_static
    server_feats[:, 6] = np.log1p(view.est_work) / 5
    server_feats[:, 7] = np.log1p(view.n_assigned) / 5
    server_feats[:, 8] = view.busy_cores / tables.cores
    server_feats[:, 9] = view.free_gpus / np.maximum(tables.gpus, 1)
    server_feats[:, 10] = resident
    server_feats[:, 11] = np.log1p(batch) / 5
    server_feats[:, 12] = np.log1p(np.where(mask, exec_s, 0.0)) / 5
    server_feats[:, 13] = np.log1p(np.where(mask, wait, 0.0)) / 5
    server_feats[:, 14] = np.log1p(transfer) / 5
    server_feats[:, 15] = np.log1p(np.where(mask, finish, 0.0)) / 5
    return Decision(
        now=view.now,
        task=task,
        mask=mask,
        transfer_s=transfer,
        wait_s=wait,
        load_s=load,
        exec_s=exec_s,
        finish_s=finish,
        est_work=view.est_work,
        n_assigned=view.n_assigned,
        task_features=task_feats,
        server_features=server_feats,
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
