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

import dataclasses
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scalesched.cluster.deployment import Deployment
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import (
    MODELS,
    EnginePerf,
    ReplicaGroupPerf,
    engine_perf,
    tensor_parallel_degree,
)
from scalesched.workload.instance import TaskInstance, WorkflowInstance

MODEL_NAMES: tuple[str, ...] = tuple(sorted(MODELS))
"""Column order of every per-model array."""
MODEL_INDEX: dict[str, int] = {name: i for i, name in enumerate(MODEL_NAMES)}

ENGINE_ABSENT, ENGINE_LOADING, ENGINE_READY = 0, 1, 2
"""Values of ``ClusterStateView.engine_state``; LOADING also covers waiting for GPUs."""

MAX_BATCH_TABLE = 1024
"""Decode tables cover batch sizes 0..MAX_BATCH_TABLE (engines cap their batch below it)."""

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


class RouteMemory:
    """What a router has sent to each engine, so that decisions can estimate what is cached
    where without reading any engine's cache (which a real router cannot see).

    The same bookkeeping as the ``cache_aware`` router's ``RouterTree`` (SGLang's), kept
    by the run ledger for every placement whoever made it: per engine (server, model), the
    application prompts (``prefix_id``, its tokens) and the calls (``call_key``, ending at
    prompt + estimated output) routed there, least recently routed forgotten first beyond
    the engine's KV capacity in tokens, and a server's whole memory forgotten when it dies.
    Only calls with a prefix identity are recorded; runs without any cost nothing.
    """

    __slots__ = ("_capacity", "_engines", "_where")

    def __init__(self, tables: ClusterTables) -> None:
        self._capacity = tables.kv_capacity.take(tables.class_or_zero)
        """(N, models) KV tokens of each engine (meaningful where feasible)."""
        self._engines: dict[tuple[int, int], tuple[OrderedDict[object, int], list[int]]] = {}
        """(server, model) -> (key -> own tokens, in routing order; [tokens held])."""
        self._where: dict[tuple[int, object], dict[int, int]] = {}
        """(model, key) -> {server: tokens the key's prefix ends at}."""

    def route(
        self,
        server: int,
        model: int,
        prefix_id: str,
        prefix_tokens: int,
        call_key: object,
        context_key: object | None,
        end_tokens: int,
    ) -> None:
        """A call was sent to ``server``: its application prompt and its own context (up to
        ``end_tokens`` = prompt + estimated output) are now expected cached there."""
        self._add(server, model, prefix_id, prefix_tokens, 0)
        where = self._where
        base = 0
        if context_key is not None:
            base = where.get((model, context_key), {}).get(server, 0)
        if not base:
            base = prefix_tokens
        self._add(server, model, call_key, end_tokens, base)

    def _add(self, server: int, model: int, key: object, end: int, base: int) -> None:
        engine = self._engines.get((server, model))
        if engine is None:
            engine = self._engines[(server, model)] = (OrderedDict(), [0])
        entries, held = engine
        if key in entries:
            entries.move_to_end(key)
            return
        own = max(end - base, 1)  # at least a token: the memory stays bounded by capacity
        entries[key] = own
        held[0] += own
        self._where.setdefault((model, key), {})[server] = end
        capacity = int(self._capacity[server, model])
        while held[0] > capacity and len(entries) > 1:
            old, old_own = entries.popitem(last=False)
            held[0] -= old_own
            self._forget(model, old, server)

    def _forget(self, model: int, key: object, server: int) -> None:
        servers = self._where.get((model, key))
        if servers is not None:
            servers.pop(server, None)
            if not servers:
                del self._where[(model, key)]

    def forget_server(self, server: int) -> None:
        """``server`` is gone and its caches with it."""
        for s, m in [k for k in self._engines if k[0] == server]:
            for key in self._engines.pop((s, m))[0]:
                self._forget(m, key, s)

    def cached(self, task: TaskRequest, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(N,) tokens of ``task``'s prompt expected cached on each server (its context
        where the session's previous call went, else its application prompt where one was
        routed), capped at the prompt; and (N,) 1.0 where that context is."""
        tokens, resident = np.zeros(n), np.zeros(n)
        if task.prefix_id is None:
            return tokens, resident
        m = task.model
        for s, end in self._where.get((m, task.prefix_id), {}).items():
            tokens[s] = end
        if task.context_key is not None:
            for s, end in self._where.get((m, task.context_key), {}).items():
                tokens[s] = max(tokens[s], end)
                resident[s] = 1.0
        np.minimum(tokens, task.prompt_tokens, out=tokens)
        return tokens, resident


_CACHE_LIMIT = 1 << 16
"""Entries a per-key cache of ``ClusterTables`` holds before it starts over."""


@dataclass(frozen=True, slots=True)
class _ModelColumns:
    """One model's per-server columns of the static tables (see ``make_decision``)."""

    mask: np.ndarray
    """(N,) bool, read-only: servers that can run the model."""
    masked_out: np.ndarray | None
    """``~mask``, None when every server can run it."""
    kk: np.ndarray
    """(N,) engine class per server (0 where infeasible)."""
    base: np.ndarray
    """``kk`` times the decode tables' row width: flat index of each server's row."""
    load: np.ndarray
    tp: np.ndarray
    classes: list[tuple[int, EnginePerf | ReplicaGroupPerf]]


class ClusterTables:
    """Static arrays of one cluster, built once and shared by every decision."""

    def __init__(self, spec: ClusterSpec, deployment: Deployment | None = None) -> None:
        """``deployment``: pinned replicas replace dynamic residency; a model is feasible
        only where a replica of it is, with that replica group's engine (``pinned``)."""
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
        self.mean_nic_bytes_per_s = float(self.nic_bytes_per_s.mean())

        n_models = len(MODEL_NAMES)
        self.pinned = deployment is not None
        # GPUs each engine holds: fractional under a deployment with shared GPUs.
        self.tp = np.zeros((n, n_models), dtype=np.float64 if self.pinned else np.int64)
        self.engine_class = np.full((n, n_models), -1, dtype=np.int64)
        self.load_s = np.zeros((n, n_models))
        classes: dict[object, int] = {}
        self.engines: list[EnginePerf | ReplicaGroupPerf] = []
        for si, server in enumerate(servers):
            for mi, model in enumerate(MODEL_NAMES):
                if deployment is not None:
                    group = deployment.engine_at(si, model)
                    if group is None:
                        continue
                    key: object = group
                    held: float = group.gpus
                    if key not in classes:
                        classes[key] = len(self.engines)
                        self.engines.append(group)
                elif server.gpu_type is None or server.gpus <= 0:
                    continue
                else:
                    tp = tensor_parallel_degree(model, server.gpu_type, server.gpus)
                    if tp is None:
                        continue
                    key, held = (model, server.gpu_type, tp), tp
                    if key not in classes:
                        classes[key] = len(self.engines)
                        self.engines.append(engine_perf(model, server.gpu_type, tp))
                k = classes[key]
                self.tp[si, mi] = held
                self.engine_class[si, mi] = k
                self.load_s[si, mi] = self.engines[k].load_s(server.load_gbs)
        self.feasible = self.engine_class >= 0
        self.feasible.setflags(write=False)
        self.class_or_zero = np.where(self.feasible, self.engine_class, 0)
        self.all_servers = np.ones(n, dtype=bool)
        self.all_servers.setflags(write=False)
        self.zeros = np.zeros(n)
        self.zeros.setflags(write=False)
        self.feasible_any = np.asarray(self.feasible.any(axis=0), dtype=bool)
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
        self.decode_step_increase = np.zeros_like(self.decode_lin)
        """[k, b]: decode_lin[k, b] - decode_lin[k, b - 1], what one more request in a
        batch of b costs every step (0 for b = 0)."""
        self.decode_step_increase[:, 1:] = np.diff(self.decode_lin, axis=1)
        self.max_batch = np.array([e.max_batch for e in self.engines] or [1])
        self.kv_capacity = np.array([e.kv_capacity_tokens for e in self.engines] or [1])
        self.server_static = _static_server_features(self)
        self.slots_cap = np.minimum(self.kv_capacity, self.max_batch)
        # Per model: (class, engine, servers of that class, batch-1 step, attention coef).
        self.model_classes: list[
            list[tuple[int, EnginePerf | ReplicaGroupPerf, int, float, float]]
        ] = [
            [
                (
                    k,
                    eng,
                    int((self.engine_class[:, mi] == k).sum()),
                    float(self.decode_lin[k, 1]),
                    float(self.decode_attn[k]),
                )
                for k, eng in enumerate(self.engines)
                if eng.model == model
            ]
            for mi, model in enumerate(MODEL_NAMES)
        ]
        self._init_decision_columns()

    def _init_decision_columns(self) -> None:
        """Per model, the columns ``make_decision`` reads, kept contiguous so a decision
        takes them without slicing; and the flat views of the decode tables it gathers
        from (views: an in-place change of the tables, ``predict.drift``, shows through)."""
        width = self.decode_lin.shape[1]
        self._lin_flat = self.decode_lin.reshape(-1)
        self._increase_flat = self.decode_step_increase.reshape(-1)
        assert np.shares_memory(self._lin_flat, self.decode_lin)
        assert np.shares_memory(self._increase_flat, self.decode_step_increase)
        self._model_cols: list[_ModelColumns] = []
        for mi in range(len(MODEL_NAMES)):
            kk = np.ascontiguousarray(self.class_or_zero[:, mi])
            mask = np.ascontiguousarray(self.feasible[:, mi])
            mask.setflags(write=False)
            self._model_cols.append(
                _ModelColumns(
                    mask=mask,
                    masked_out=None if mask.all() else ~mask,
                    kk=kk,
                    base=kk * width,
                    load=np.ascontiguousarray(self.load_s[:, mi]),
                    tp=np.ascontiguousarray(self.tp[:, mi]),
                    classes=[(k, eng) for k, eng, *_ in self.model_classes[mi]],
                )
            )
        self._prefill_cache: dict[tuple[int, int], np.ndarray] = {}
        self._prefill_floats: dict[tuple[int, int], tuple[float, ...]] = {}
        self._slots_cache: dict[int, np.ndarray] = {}
        self._bandwidth: dict[int, np.ndarray] = {}

    def __setstate__(self, state: dict[str, object]) -> None:
        """Unpickled (or deep-copied): the flat views must view this copy's tables."""
        self.__dict__.update(state)
        self._init_decision_columns()

    def bandwidth_from(self, src: int) -> np.ndarray:
        """(N,) bytes/s from server ``src`` to each server: the slower NIC of the two."""
        bw = self._bandwidth.get(src)
        if bw is None:
            bw = np.minimum(self.nic_bytes_per_s, self.nic_bytes_per_s[src])
            bw.setflags(write=False)
            self._bandwidth[src] = bw
        return bw

    def prefill_by_class(self, model: int, prompt: int) -> np.ndarray:
        """Seconds to prefill ``prompt`` tokens alone, per engine class (0 for the classes
        that do not serve ``model``). Cached: the same doubles as calling ``prefill_s``."""
        key = (model, prompt)
        out = self._prefill_cache.get(key)
        if out is None:
            if len(self._prefill_cache) >= _CACHE_LIMIT:
                self._prefill_cache.clear()  # bounded: a long run's memory stays flat
            out = np.zeros(max(1, len(self.engines)))
            for (k, _), seconds in zip(
                self._model_cols[model].classes, self.prefill_floats(model, prompt), strict=True
            ):
                out[k] = seconds
            out.setflags(write=False)
            self._prefill_cache[key] = out
        return out

    def prefill_floats(self, model: int, prompt: int) -> tuple[float, ...]:
        """``prefill_s(prompt)`` of each engine class of ``model`` (``model_classes``
        order), cached as Python floats."""
        key = (model, prompt)
        out = self._prefill_floats.get(key)
        if out is None:
            if len(self._prefill_floats) >= _CACHE_LIMIT:
                self._prefill_floats.clear()
            out = tuple(eng.prefill_s(prompt) for _, eng in self._model_cols[model].classes)
            self._prefill_floats[key] = out
        return out

    def slots_by_class(self, need_tokens: int) -> np.ndarray:
        """``admission_slots`` cached per ``need_tokens``."""
        out = self._slots_cache.get(need_tokens)
        if out is None:
            if len(self._slots_cache) >= _CACHE_LIMIT:
                self._slots_cache.clear()
            out = admission_slots(self, need_tokens)
            out.setflags(write=False)
            self._slots_cache[need_tokens] = out
        return out

    # -- costs with no contention: used for ranks, lower bounds and capacity ------------
    def llm_class_times(self, model: int, prompt: int, output: int) -> list[tuple[float, int]]:
        """(seconds alone, server count) per engine class that can run the model."""
        ctx = prompt + output // 2
        return [
            (pre + output * (lin1 + attn * ctx), count)
            for pre, (_, _, count, lin1, attn) in zip(
                self.prefill_floats(model, prompt), self.model_classes[model], strict=True
            )
        ]

    def fastest_llm_time(self, model: int, prompt: int, output: int) -> float:
        """The request alone on its fastest feasible server (inf if none can run it)."""
        return min((t for t, _ in self.llm_class_times(model, prompt, output)), default=math.inf)

    def mean_llm_time(self, model: int, prompt: int, output: int) -> float:
        """HEFT's mean execution cost over the servers that can run the model."""
        times = self.llm_class_times(model, prompt, output)
        total = sum(c for _, c in times)
        return sum(t * c for t, c in times) / total if total else math.inf

    def mean_transfer_s(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        return self.latency_s + nbytes / self.mean_nic_bytes_per_s


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


class Decision:
    """Everything a scheduler may use to place one task.

    The estimate arrays are computed up front (every heuristic needs them); the normalised
    feature matrices only when a learned policy asks. A decision is valid until the task is
    placed: it reads the live state of the view.
    """

    __slots__ = (
        "now",
        "task",
        "mask",
        "transfer_s",
        "wait_s",
        "load_s",
        "exec_s",
        "finish_s",
        "imposed_s",
        "can_defer",
        "est_work",
        "n_assigned",
        "_tables",
        "_view",
        "_resident",
        "_batch",
        "_task_features",
        "_server_features",
    )

    def __init__(
        self,
        *,
        now: float,
        task: TaskRequest,
        mask: np.ndarray,
        transfer_s: np.ndarray,
        wait_s: np.ndarray,
        load_s: np.ndarray,
        exec_s: np.ndarray,
        finish_s: np.ndarray,
        tables: ClusterTables,
        view: ClusterStateView,
        resident: np.ndarray,
        batch: np.ndarray,
        imposed_s: np.ndarray | None = None,
    ) -> None:
        self.now = now
        self.task = task
        self.mask = mask
        """(N,) bool: servers that can run the task."""
        self.transfer_s = transfer_s
        """(N,) seconds until the task's inputs have arrived on each server."""
        self.wait_s = wait_s
        """(N,) estimated seconds before a server can start it (queue, GPUs, model load)."""
        self.load_s = load_s
        """(N,) the part of ``wait_s`` that is loading the model (0 when resident)."""
        self.exec_s = exec_s
        """(N,) estimated execution seconds on each server at its current load."""
        self.finish_s = finish_s
        """(N,) estimated seconds from now to the end: max(transfer, wait) + exec."""
        self.can_defer = True
        """Whether the engine accepts ``Defer`` for this task (False once nothing else is
        left to happen: a deferred task is then offered for the last time)."""
        self.imposed_s = imposed_s if imposed_s is not None else tables.zeros
        """(N,) estimated seconds of delay the task adds to the requests already running in
        the engine it would join (a larger batch decodes every step more slowly)."""
        self.est_work: np.ndarray = view.est_work
        self.n_assigned: np.ndarray = view.n_assigned
        self._tables = tables
        self._view = view
        self._resident = resident
        self._batch = batch
        self._task_features: np.ndarray | None = None
        self._server_features: np.ndarray | None = None

    @property
    def n_servers(self) -> int:
        return int(self.mask.shape[0])

    @property
    def tables(self) -> ClusterTables:
        """The cluster's static arrays (for policies that score engines themselves)."""
        return self._tables

    @property
    def view(self) -> ClusterStateView:
        """The live per-server state this decision reads."""
        return self._view

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

    def _build_server_features(self) -> np.ndarray:
        t, v, mask = self._tables, self._view, self.mask
        f = np.empty((t.n, SERVER_FEATURES))
        self._cache_features(f)
        f[:, :6] = t.server_static
        f[:, 6] = np.log1p(v.est_work) / 5
        f[:, 7] = np.log1p(v.n_assigned) / 5
        f[:, 8] = v.busy_cores / t.cores
        f[:, 9] = v.free_gpus / np.maximum(t.gpus, 1)
        f[:, 10] = self._resident
        f[:, 11] = np.log1p(self._batch) / 5
        f[:, 12] = np.log1p(np.where(mask, self.exec_s, 0.0)) / 5
        f[:, 13] = np.log1p(np.where(mask, self.wait_s, 0.0)) / 5
        f[:, 14] = np.log1p(self.transfer_s) / 5
        f[:, 15] = np.log1p(np.where(mask, self.finish_s, 0.0)) / 5
        # Relative to the best feasible server: scale-free, so they mean the same at any N
        # and for short and long tasks alike.
        best_exec = float(self.exec_s[mask].min())
        f[:, RELATIVE_FINISH_FEATURE] = np.where(mask, relative_excess(self.finish_s, mask), 0.0)
        f[:, 17] = np.log1p(np.where(mask, self.exec_s - best_exec, 0.0) / (best_exec + 1e-3))
        return f

    def _cache_features(self, f: np.ndarray) -> None:
        """The cache columns, from the router's memory the view keeps (``routes``, a
        :class:`RouteMemory`; views without one, and tasks without a prefix identity,
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
        routes = getattr(self._view, "routes", None)
        if task.prefix_id is None or task.kind != "llm" or not isinstance(routes, RouteMemory):
            return
        tokens, resident = routes.cached(task, self._tables.n)
        live = self._view.engine_state[:, task.model] != ENGINE_ABSENT
        f[:, CACHED_SHARE_FEATURE] = np.where(live, tokens, 0.0) / max(task.prompt_tokens, 1)
        f[:, SESSION_RESIDENT_FEATURE] = np.where(live, resident, 0.0)


def task_request(
    wf: WorkflowInstance,
    i: int,
    parent_servers: Sequence[int],
    rank: float,
    workflow_age: float,
) -> TaskRequest:
    """What a scheduler may see of task ``i`` of ``wf``: estimates, never the truth."""
    task = wf.tasks[i]
    edge_bytes = wf.edge_bytes.get
    request = TaskRequest(
        kind=task.kind,
        model=MODEL_INDEX[task.model] if task.kind == "llm" and task.model else -1,
        prompt_tokens=task.prompt_tokens,
        output_tokens_est=task.output_tokens_est,
        cpu_work=task.cpu_work,
        ext_latency_est=task.ext_latency_est,
        parent_servers=tuple(parent_servers),
        parent_bytes=tuple([edge_bytes((p, i), 0.0) for p in wf.parents[i]]),
        rank=rank,
        workflow_age=workflow_age,
        role=task.role,
        pattern=wf.pattern,
        difficulty_hint=task.difficulty_hint,
    )
    return request if task.prefix_id is None else _with_prefix(request, wf, i, task)


def _with_prefix(
    request: TaskRequest, wf: WorkflowInstance, i: int, task: TaskInstance
) -> TaskRequest:
    """The request with the call's prefix identity, as a router reads it off the prompt."""
    ctx = task.context_of
    return dataclasses.replace(
        request,
        prefix_id=task.prefix_id,
        prefix_tokens=task.prefix_tokens,
        call_key=(wf.name, i),
        context_key=(wf.name, ctx) if ctx is not None else None,
    )


def mean_task_costs(tables: ClusterTables, wf: WorkflowInstance) -> list[float]:
    """HEFT's mean execution cost of every task, from estimates only."""
    return [
        tables.mean_llm_time(MODEL_INDEX[t.model], t.prompt_tokens, t.output_tokens_est)
        if t.kind == "llm" and t.model
        else t.cpu_work / tables.mean_core_speed + t.ext_latency_est
        for t in wf.tasks
    ]


def upward_ranks(
    tables: ClusterTables,
    wf: WorkflowInstance,
    costs: Sequence[float],
    finished: Callable[[int], bool],
) -> list[float]:
    """HEFT upward ranks over the *visible* DAG: a child whose revealing task has not
    ``finished`` does not exist yet for any scheduler."""
    tasks, children, edge_bytes = wf.tasks, wf.children, wf.edge_bytes.get
    transfer = tables.mean_transfer_s
    ranks = [0.0] * len(tasks)
    for i in range(len(tasks) - 1, -1, -1):
        best = 0.0
        for c in children[i]:
            rb = tasks[c].revealed_by
            if rb is not None and not finished(rb):
                continue
            x = transfer(edge_bytes((i, c), 0.0)) + ranks[c]
            if x > best:  # max(best, x), without the builtin's call
                best = x
        ranks[i] = costs[i] + best
    return ranks


def deciders(wf: WorkflowInstance) -> frozenset[int]:
    """The tasks whose completion reveals more of ``wf`` (its ranks must be recomputed)."""
    return frozenset(t.revealed_by for t in wf.tasks if t.revealed_by is not None)


class VisibleRanks:
    """Per-workflow cache of upward ranks over the visible DAG, for a whole run.

    Ranks of a workflow are computed when first asked for and dropped when one of its
    deciding tasks finishes (new tasks became visible) or the workflow completes. ``done``
    is the run's per-task finished flags, indexed like ``offsets[job] + task``. The caches
    are keyed by job, so a streamed run (``decision.ledger.StreamRanks``) keeps only the
    jobs in flight with the same code.
    """

    def __init__(
        self,
        tables: ClusterTables,
        workflows: Sequence[WorkflowInstance],
        offsets: Sequence[int] | Mapping[int, int],
        done: Sequence[bool] | Mapping[int, bool],
    ) -> None:
        self._tables = tables
        self._offsets = offsets
        self._done = done
        self._workflows: dict[int, WorkflowInstance] = dict(enumerate(workflows))
        self._ranks: dict[int, list[float] | None] = dict.fromkeys(self._workflows)
        self._costs: dict[int, list[float] | None] = dict.fromkeys(self._workflows)
        self._deciders: dict[int, frozenset[int]] = {
            job: deciders(wf) for job, wf in self._workflows.items()
        }

    def rank(self, job: int, task: int) -> float:
        ranks = self._ranks[job]
        if ranks is None:
            wf, off, done = self._workflows[job], self._offsets[job], self._done
            costs = self._costs[job]
            if costs is None:
                costs = self._costs[job] = mean_task_costs(self._tables, wf)
            ranks = upward_ranks(self._tables, wf, costs, lambda k: done[off + k])
            self._ranks[job] = ranks
        return ranks[task]

    def task_finished(self, job: int, task: int) -> None:
        if task in self._deciders[job]:
            self._ranks[job] = None

    def workflow_finished(self, job: int) -> None:
        self._ranks[job] = self._costs[job] = None


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


def admission_slots(tables: ClusterTables, need_tokens: int) -> np.ndarray:
    """Per engine class: requests of ``need_tokens`` KV tokens it runs at once (the batch cap
    or the KV memory, whichever binds first; at least one)."""
    return np.maximum(np.minimum(tables.kv_capacity // need_tokens, tables.max_batch), 1)


def make_decision(tables: ClusterTables, view: ClusterStateView, task: TaskRequest) -> Decision:
    """Estimate, for every server at once, when the task could start and finish there.

    Hot: one call per placement. The per-model columns and the per-class prefill and
    admission figures come precomputed or cached from ``tables``; every array is the same,
    bit for bit, as computing them here (the same operations on the same doubles)."""
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
        load = np.where(absent, cols.load, 0.0)
        loading = state == ENGINE_LOADING
        if loading.any():
            load[loading] = np.maximum(view.engine_ready_at[loading, m] - view.now, 0.0)
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
        tables=tables,
        view=view,
        resident=resident,
        batch=batch,
        imposed_s=imposed,
    )


def observation(
    decision: Decision, max_servers: int, server_dim: int = SERVER_FEATURES
) -> dict[str, np.ndarray]:
    """A decision as the arrays a learned policy reads, servers padded to ``max_servers``:
    the one encoding used by training (the Gym environment) and by acting
    (``NetworkScheduler``). ``server_dim``: the first that many server features (a network
    trained without the cache features reads ``BASE_SERVER_FEATURES``)."""
    n = decision.n_servers
    if n > max_servers:
        raise ValueError(f"cluster has {n} servers, more than max_servers={max_servers}")
    if server_dim not in SERVER_DIMS:
        raise ValueError(f"server_dim must be one of {SERVER_DIMS}, got {server_dim}")
    servers = np.zeros((max_servers, server_dim), dtype=np.float32)
    servers[:n] = decision.server_features[:, :server_dim]
    mask = np.zeros(max_servers, dtype=np.int8)
    mask[:n] = decision.mask
    return {
        "task": decision.task_features.astype(np.float32),
        "servers": servers,
        "mask": mask,
        "n_servers": np.array([n], dtype=np.int64),
    }


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
