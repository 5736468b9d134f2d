"""LLM serving cost model: per-engine prefill, decode-step and load times.

The tables come from ``data/llm_perf.json``, derived from measured kernel profiles by
``scripts/derive/derive_llm_perf.py`` (provenance inside the file; method in docs/cost-model.md).
Attention is added analytically here.  Everything a call needs is precomputed per engine,
so ``prefill_s`` and ``decode_step_s`` are a list lookup and a few float operations.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from scalesched.errors import InputError

KV_MEMORY_FRACTION = 0.9
"""Fraction of an engine's GPU memory usable for weights plus KV cache; the other 10% is
left for activations, the CUDA context and fragmentation (vLLM's default
``gpu_memory_utilization``)."""
MIN_KV_TOKENS = 4096
"""A tp degree fits only if its KV cache holds at least one full 4096-token context."""
MAX_TP = 8
PREFILL_ATTN_EFF = 0.5
"""Fraction of peak tensor FLOPS that prefill attention (flash-attention) achieves."""
DECODE_ATTN_EFF = 0.7
"""Fraction of peak memory bandwidth that decode attention achieves reading the KV cache."""
DEFAULT_MAX_BATCH = 256
"""Requests one engine decodes together at most (vLLM's default ``max_num_seqs``)."""

_SOURCE = "llm_perf.json"


@dataclass(frozen=True, slots=True)
class GpuType:
    name: str
    memory_gb: float
    mem_bw_gbs: float
    tflops: float
    """Dense FP16/BF16 tensor TFLOPS."""
    measured: bool
    """True if kernel profiles exist; else derived from a measured GPU by roofline scaling."""


@dataclass(frozen=True, slots=True)
class LlmModel:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    params_b: float
    weight_bytes: float
    kv_bytes_per_token: float
    vocab_size: int
    """Vocabulary of the published config (a stored logits row is this wide)."""
    context_window: int
    """Prompt + output tokens the model accepts (its published ``max_position_embeddings``)."""


def _load() -> dict[str, Any]:
    text = resources.files("scalesched.cluster").joinpath("data", _SOURCE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


_DATA = _load()
GPU_TYPES: dict[str, GpuType] = {
    name: GpuType(
        name=name,
        memory_gb=float(g["memory_gb"]),
        mem_bw_gbs=float(g["mem_bw_gbs"]),
        tflops=float(g["tflops"]),
        measured=bool(g["measured"]),
    )
    for name, g in _DATA["gpus"].items()
}
MODELS: dict[str, LlmModel] = {
    name: LlmModel(
        name=name,
        layers=int(m["layers"]),
        hidden=int(m["hidden"]),
        heads=int(m["heads"]),
        kv_heads=int(m["kv_heads"]),
        params_b=float(m["params_b"]),
        weight_bytes=float(m["weight_bytes"]),
        kv_bytes_per_token=float(m["kv_bytes_per_token"]),
        vocab_size=int(m["vocab_size"]),
        context_window=int(m["context_window"]),
    )
    for name, m in _DATA["models"].items()
}
_GRID: list[int] = [int(n) for n in _DATA["grid_tokens"]]
_LINEAR: dict[str, dict[str, dict[str, list[float]]]] = _DATA["linear_s"]


def _check(model: str, gpu_type: str) -> tuple[LlmModel, GpuType]:
    m = MODELS.get(model)
    if m is None:
        raise InputError("cost model", "model", f"unknown model {model!r}; known: {_known(MODELS)}")
    g = GPU_TYPES.get(gpu_type)
    if g is None:
        raise InputError(
            "cost model", "gpu_type", f"unknown GPU type {gpu_type!r}; known: {_known(GPU_TYPES)}"
        )
    return m, g


def _known(d: dict[str, Any]) -> str:
    return ", ".join(d)


def _kv_capacity_tokens(m: LlmModel, g: GpuType, tp: int) -> int:
    free = tp * g.memory_gb * 1e9 * KV_MEMORY_FRACTION - m.weight_bytes
    return max(0, int(free // m.kv_bytes_per_token))


@cache
def tensor_parallel_degree(model: str, gpu_type: str, gpus: int) -> int | None:
    """Smallest power of two tp <= min(gpus, 8) at which the model fits; None if none does.

    Fits: the weights take at most 90% of the tp GPUs' memory (``KV_MEMORY_FRACTION``; the
    other 10% is the runtime's reserve) and what is left of that 90% holds at least
    ``MIN_KV_TOKENS`` tokens of KV cache.  Only tp degrees with profiles count (phi-2: 1).
    """
    m, g = _check(model, gpu_type)
    tables = _LINEAR[model][gpu_type]
    tp = 1
    while tp <= min(gpus, MAX_TP):
        if str(tp) in tables and _kv_capacity_tokens(m, g, tp) >= MIN_KV_TOKENS:
            return tp
        tp *= 2
    return None


class EnginePerf:
    """One serving engine: ``model`` on ``tp`` GPUs of ``gpu_type`` (tensor parallel).

    Step times: ``linear(n)`` is the measured (or roofline-scaled) time of everything but
    attention for a forward pass over n tokens, interpolated linearly between grid points and
    extrapolated linearly beyond 4096 tokens; attention is analytic (see docs/cost-model.md).
    """

    __slots__ = (
        "model",
        "gpu_type",
        "tp",
        "kv_capacity_tokens",
        "max_batch",
        "weight_bytes",
        "decode_attn_s_per_token",
        "prefill_attn_s_per_token2",
        "_lin",
        "_lin_max_n",
        "_lin_slope",
    )

    def __init__(self, model: str, gpu_type: str, tp: int) -> None:
        m, g = _check(model, gpu_type)
        grid = _LINEAR[model][gpu_type].get(str(tp))
        if grid is None:
            have = ", ".join(_LINEAR[model][gpu_type])
            raise InputError(
                "cost model", "tp", f"no profile for {model} at tp={tp}; profiled tp: {have}"
            )
        kv_tokens = _kv_capacity_tokens(m, g, tp)
        if kv_tokens <= 0:
            raise InputError(
                "cost model",
                "tp",
                f"{model} ({m.weight_bytes / 1e9:.1f} GB) does not fit on {tp} x {gpu_type}",
            )
        self.model = model
        self.gpu_type = gpu_type
        self.tp = tp
        self.kv_capacity_tokens = kv_tokens
        self.max_batch = DEFAULT_MAX_BATCH
        self.weight_bytes = m.weight_bytes
        # decode: each step reads every request's KV cache, split over tp GPUs
        self.decode_attn_s_per_token = m.kv_bytes_per_token / (
            g.mem_bw_gbs * 1e9 * tp * DECODE_ATTN_EFF
        )
        # prefill: causal QK^T and PV, 2 x 2*n^2*hidden FLOPs per layer, halved by the mask
        self.prefill_attn_s_per_token2 = (2 * 2 * m.layers * m.hidden / 2) / (
            g.tflops * 1e12 * PREFILL_ATTN_EFF * tp
        )
        n_max = _GRID[-1]
        lin = np.interp(np.arange(n_max + 1, dtype=float), _GRID, grid)
        lin[0] = 0.0
        self._lin: list[float] = lin.tolist()
        self._lin_max_n = n_max
        self._lin_slope = (grid[-1] - grid[-2]) / (_GRID[-1] - _GRID[-2])

    def __repr__(self) -> str:
        return f"EnginePerf({self.model!r}, {self.gpu_type!r}, tp={self.tp})"

    def linear_s(self, num_tokens: int) -> float:
        """Non-attention forward-pass time over ``num_tokens`` tokens."""
        if num_tokens <= self._lin_max_n:
            return self._lin[num_tokens] if num_tokens > 0 else 0.0
        return self._lin[-1] + self._lin_slope * (num_tokens - self._lin_max_n)

    def prefill_s(self, prompt_tokens: int) -> float:
        """Seconds to prefill one prompt of ``prompt_tokens`` tokens alone."""
        n = prompt_tokens
        if n <= 0:
            return 0.0
        lin = self._lin[n] if n <= self._lin_max_n else self.linear_s(n)
        return lin + self.prefill_attn_s_per_token2 * n * n

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        """One decode iteration for ``batch`` requests whose contexts sum to context_tokens."""
        if batch <= 0:
            return 0.0
        lin = self._lin[batch] if batch <= self._lin_max_n else self.linear_s(batch)
        return lin + self.decode_attn_s_per_token * context_tokens

    def load_s(self, load_gbs: float) -> float:
        """Seconds to load the weights at ``load_gbs`` GB/s (inf if the server cannot load)."""
        if load_gbs <= 0:
            return math.inf
        return self.weight_bytes / (load_gbs * 1e9)


@cache
def engine_perf(model: str, gpu_type: str, tp: int) -> EnginePerf:
    """The (cached) cost model of one engine; InputError if the combination cannot run."""
    return EnginePerf(model, gpu_type, tp)


def provenance() -> dict[str, Any]:
    """The provenance block of the derived tables."""
    prov: dict[str, Any] = dict(_DATA["provenance"])
    return prov


# -- deployments: tensor-parallel all-reduce and fractional GPU shares (additive) ----------
# Used only by pinned deployments (``scalesched.cluster.deployment``); the engines above,
# and so every result without a deployment, are unchanged.

GPU_SHARES = (0.25, 0.5, 1.0)
"""Fractions of a GPU a replica may hold (MPS-style: compute, bandwidth and memory)."""
TP_DEGREES = (1, 2, 4, 8)
ALLREDUCES_PER_LAYER = 2
"""Megatron-style tensor parallelism: one all-reduce after attention, one after the MLP."""
ACT_BYTES = 2
"""FP16 activations: an all-reduce over n tokens moves n x hidden x 2 bytes."""
_AR_SOURCE = "allreduce.json"


def _load_allreduce() -> dict[str, Any]:
    text = resources.files("scalesched.cluster").joinpath("data", _AR_SOURCE).read_text()
    data: dict[str, Any] = json.loads(text)
    return data


_AR = _load_allreduce()
_AR_LOG_SIZES = np.log(np.array(_AR["sizes_bytes"], dtype=float))


def allreduce_s(gpu_type: str, tp: int, nbytes: float) -> float:
    """Seconds of one all-reduce of ``nbytes`` over ``tp`` GPUs of one server (0 at tp 1).

    Measured (NVLink, H100/A100): interpolated in log size, linear extrapolation past the
    largest message. Otherwise a PCIe ring: 2(tp-1) steps of alpha + 2(tp-1)/tp x bytes / bw.
    """
    if tp <= 1 or nbytes <= 0:
        return 0.0
    table = _AR["seconds"].get(gpu_type, {}).get(str(tp))
    if table is None:
        ring = _AR["pcie_ring"]
        steps = 2 * (tp - 1)
        return float(steps * ring["alpha_s"] + steps / tp * nbytes / (ring["bus_gbs"] * 1e9))
    sizes = _AR["sizes_bytes"]
    if nbytes >= sizes[-1]:
        return float(table[-1] * nbytes / sizes[-1])
    return float(np.interp(math.log(max(nbytes, sizes[0])), _AR_LOG_SIZES, table))


def replica_kv_tokens(model: str, gpu_type: str, tp: int, share: float) -> int:
    """KV-cache tokens of one replica on ``share`` of each of ``tp`` GPUs (0: does not fit)."""
    m, g = _check(model, gpu_type)
    free = share * tp * g.memory_gb * 1e9 * KV_MEMORY_FRACTION - m.weight_bytes
    return max(0, int(free // m.kv_bytes_per_token))


def replica_fits(model: str, gpu_type: str, tp: int, share: float) -> bool:
    """True if a profile exists at ``tp`` and weights plus ``MIN_KV_TOKENS`` of KV fit."""
    _check(model, gpu_type)
    return (
        str(tp) in _LINEAR[model][gpu_type]
        and replica_kv_tokens(model, gpu_type, tp, share) >= MIN_KV_TOKENS
    )


class ReplicaGroupPerf:
    """``count`` identical data-parallel replicas of ``model`` on one server, each on
    ``share`` of ``tp`` GPUs, served as one engine (the simulator's unit per server and model).

    Per replica: the engine's step times plus ``ALLREDUCES_PER_LAYER`` all-reduces per layer
    over the step's tokens, all divided by ``share`` (co-located replicas split compute and
    memory bandwidth); KV memory is the replica's partition.  The group spreads its batch and
    contexts evenly over the replicas: a decode step of ``batch`` requests takes one replica's
    step at ceil(batch / count).  Same interface as ``EnginePerf`` where the simulator reads it.
    """

    __slots__ = (
        "model",
        "gpu_type",
        "tp",
        "share",
        "count",
        "gpus",
        "kv_capacity_tokens",
        "max_batch",
        "weight_bytes",
        "_base",
        "_ar_bytes_per_token",
        "_layers",
    )

    def __init__(self, model: str, gpu_type: str, tp: int, share: float, count: int = 1) -> None:
        if share not in GPU_SHARES:
            raise InputError("cost model", "share", f"share must be one of {GPU_SHARES}")
        if count < 1:
            raise InputError("cost model", "count", "a replica group needs count >= 1")
        base = engine_perf(model, gpu_type, tp)
        kv = replica_kv_tokens(model, gpu_type, tp, share)
        if kv < MIN_KV_TOKENS:
            raise InputError(
                "cost model",
                "share",
                f"{model} does not fit on {share:g} of {tp} x {gpu_type} "
                f"(weights + {MIN_KV_TOKENS} KV tokens)",
            )
        m = MODELS[model]
        self.model, self.gpu_type, self.tp, self.share, self.count = (
            model,
            gpu_type,
            tp,
            share,
            count,
        )
        self.gpus = tp * share * count
        """GPUs the group holds (fractional with shares)."""
        self.kv_capacity_tokens = kv * count
        self.max_batch = min(DEFAULT_MAX_BATCH * count, 1024)
        self.weight_bytes = base.weight_bytes
        self._base = base
        self._ar_bytes_per_token = m.hidden * ACT_BYTES
        self._layers = m.layers

    def __repr__(self) -> str:
        return (
            f"ReplicaGroupPerf({self.model!r}, {self.gpu_type!r}, tp={self.tp}, "
            f"share={self.share:g}, count={self.count})"
        )

    def comm_s(self, num_tokens: int) -> float:
        """Tensor-parallel all-reduce time of one forward pass over ``num_tokens`` tokens."""
        if self.tp <= 1 or num_tokens <= 0:
            return 0.0
        one = allreduce_s(self.gpu_type, self.tp, num_tokens * self._ar_bytes_per_token)
        return ALLREDUCES_PER_LAYER * self._layers * one

    def prefill_s(self, prompt_tokens: int) -> float:
        if prompt_tokens <= 0:
            return 0.0
        return (self._base.prefill_s(prompt_tokens) + self.comm_s(prompt_tokens)) / self.share

    def decode_step_s(self, batch: int, context_tokens: int) -> float:
        if batch <= 0:
            return 0.0
        per = -(-batch // self.count)
        ctx = context_tokens / self.count
        return (
            self._base.decode_step_s(per, 0)
            + self._base.decode_attn_s_per_token * ctx
            + self.comm_s(per)
        ) / self.share

    def load_s(self, load_gbs: float) -> float:
        return self._base.load_s(load_gbs)


@cache
def replica_group_perf(
    model: str, gpu_type: str, tp: int, share: float, count: int = 1
) -> ReplicaGroupPerf:
    """The (cached) cost model of a replica group; InputError if a replica cannot run."""
    return ReplicaGroupPerf(model, gpu_type, tp, share, count)


def allreduce_provenance() -> dict[str, Any]:
    prov: dict[str, Any] = dict(_AR["provenance"])
    return prov
