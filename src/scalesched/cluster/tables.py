"""Static tables of one cluster: every per-server and per-model array a decision reads that
never changes during a run (feasibility, engine classes, decode tables, load times, static
server features), derived once from a ``ClusterSpec`` and the LLM cost model.

Plain data derived from the specs, so every layer can share one copy: the contract's
feature module (``scalesched.decision.features``) reads it, executors and policies hold it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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

MODEL_NAMES: tuple[str, ...] = tuple(sorted(MODELS))
"""Column order of every per-model array."""
MODEL_INDEX: dict[str, int] = {name: i for i, name in enumerate(MODEL_NAMES)}

MAX_BATCH_TABLE = 1024
"""Decode tables cover batch sizes 0..MAX_BATCH_TABLE (engines cap their batch below it)."""


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
        self._init_servers()
        self._init_engines(deployment)
        self._init_masks()
        self._init_decode_tables()
        self.server_static = _static_server_features(self)
        self.slots_cap = np.minimum(self.kv_capacity, self.max_batch)
        self._init_model_classes()
        self._init_decision_columns()

    def _init_servers(self) -> None:
        """Per-server hardware as arrays (GPUs, cores, core speed, NIC), and the cluster
        means and maxima the cost estimates use."""
        servers = self.spec.servers
        self.names = [s.name for s in servers]
        self.gpus = np.array([s.gpus for s in servers], dtype=np.float64)
        self.cores = np.array([s.cpu_cores for s in servers], dtype=np.float64)
        self.core_speed = np.array([s.core_speed for s in servers], dtype=np.float64)
        self.nic_bytes_per_s = np.array([s.nic_gbps * 1e9 / 8 for s in servers])
        self.latency_s = self.spec.network_latency_s
        self.max_core_speed = float(self.core_speed.max())
        self.mean_core_speed = float(self.core_speed.mean())
        self.mean_nic_bytes_per_s = float(self.nic_bytes_per_s.mean())

    def _init_engines(self, deployment: Deployment | None) -> None:
        """Which engine runs each model on each server: one engine class per distinct
        (model, GPU type, tensor-parallel degree), or per pinned replica group under a
        deployment; with the GPUs it holds and its load time there."""
        n, n_models = self.n, len(MODEL_NAMES)
        self.pinned = deployment is not None
        # GPUs each engine holds: fractional under a deployment with shared GPUs.
        self.tp = np.zeros((n, n_models), dtype=np.float64 if self.pinned else np.int64)
        self.engine_class = np.full((n, n_models), -1, dtype=np.int64)
        self.load_s = np.zeros((n, n_models))
        classes: dict[object, int] = {}
        self.engines: list[EnginePerf | ReplicaGroupPerf] = []
        for si, server in enumerate(self.spec.servers):
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

    def _init_masks(self) -> None:
        """Feasibility (read-only, shared by every decision) and the constant masks."""
        n = self.n
        self.feasible = self.engine_class >= 0
        self.feasible.setflags(write=False)
        self.class_or_zero = np.where(self.feasible, self.engine_class, 0)
        self.all_servers = np.ones(n, dtype=bool)
        self.all_servers.setflags(write=False)
        self.zeros = np.zeros(n)
        self.zeros.setflags(write=False)
        self.feasible_any = np.asarray(self.feasible.any(axis=0), dtype=bool)

    def _init_decode_tables(self) -> None:
        """Decode step = lin[k, batch] + attn[k] * context_tokens (the cost model is linear
        in context by construction): tabulated once so decisions index instead of calling;
        and each engine class's batch cap and KV capacity."""
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

    def _init_model_classes(self) -> None:
        """Per model: (class, engine, servers of that class, batch-1 step, attention coef)."""
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

    def _init_decision_columns(self) -> None:
        """Per model, the columns ``make_decision`` reads, kept contiguous so a decision
        takes them without slicing; and the flat views of the decode tables it gathers
        from (views: an in-place change of the tables, ``eval.drift``, shows through)."""
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
    def llm_class_times(
        self, model: int, prompt: int, output: int, prefilled: int | None = None
    ) -> list[tuple[float, int]]:
        """(seconds alone, server count) per engine class that can run the model;
        ``prefilled``: the prompt tokens computed (default all: none came from a cache)."""
        ctx = prompt + output // 2
        pre_tokens = prompt if prefilled is None else prefilled
        return [
            (pre + output * (lin1 + attn * ctx), count)
            for pre, (_, _, count, lin1, attn) in zip(
                self.prefill_floats(model, pre_tokens), self.model_classes[model], strict=True
            )
        ]

    def fastest_llm_time(
        self, model: int, prompt: int, output: int, prefilled: int | None = None
    ) -> float:
        """The request alone on its fastest feasible server (inf if none can run it)."""
        times = self.llm_class_times(model, prompt, output, prefilled)
        return min((t for t, _ in times), default=math.inf)

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


def admission_slots(tables: ClusterTables, need_tokens: int) -> np.ndarray:
    """Per engine class: requests of ``need_tokens`` KV tokens it runs at once (the batch cap
    or the KV memory, whichever binds first; at least one)."""
    return np.maximum(np.minimum(tables.kv_capacity // need_tokens, tables.max_batch), 1)
