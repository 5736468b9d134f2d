"""Every engine configuration any deployment of a cluster can give a model, and the time
an LLM call takes alone on the fastest of them: the per-call cost of the world-independent
lower bound (``kernel.records.any_deployment_lower_bound``).

A run's contention-free bound (``kernel.records.lower_bound``) puts each call alone on the
fastest engine *of the run's world*: under a planned deployment only the replica groups the
plan holds, under dynamic residency one engine per model and server at the smallest
tensor-parallel degree that fits. So the same jobs have different bounds in different
worlds, and a run in a poor deployment looks closer to its bound than it is. The configurations
here are every one a world of the simulator can hold on some server of the cluster:

* dynamic residency's engine: the model at ``tensor_parallel_degree`` on the server's GPUs
  (``perf.EnginePerf``: no all-reduce is charged);
* every replica group a deployment file can pin (``perf.ReplicaGroupPerf``): each tensor-
  parallel degree of ``TP_DEGREES`` up to the server's GPUs with a profile, each share of
  ``GPU_SHARES`` at which weights and ``MIN_KV_TOKENS`` fit, with the most replicas the
  server's GPUs hold (``gpus // (tp x share)``). The replica count matters alone: the
  simulator spreads a group's contexts over its replicas, so a lone call's attention is
  divided by the count; its prefill and the rest of its step are not. So for a (GPU type,
  tp, share) the group with the most replicas is the fastest for every call, and the others
  are left out; a smaller share is kept only where it allows a lower attention cost (more
  replicas per GPU), since its other costs are divided by the share.

Times are computed exactly as ``ClusterTables.llm_class_times`` computes them (prefill, then
``output x (step at batch 1 + attention x mean context)``), so a deployment's own bound is
never below this one by more than rounding.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import (
    GPU_SHARES,
    MAX_TP,
    TP_DEGREES,
    EnginePerf,
    ReplicaGroupPerf,
    engine_perf,
    replica_fits,
    replica_group_perf,
    tensor_parallel_degree,
)
from scalesched.cluster.tables import MODEL_NAMES

_CACHE_LIMIT = 1 << 16
"""Entries the per-call cache holds before it starts over (a long run's memory stays flat)."""


@dataclass(frozen=True, slots=True)
class Config:
    """One engine configuration and its alone-step costs (as ``ClusterTables`` tabulates
    them: ``decode_lin[k, 1]`` and ``decode_attn[k]``)."""

    engine: EnginePerf | ReplicaGroupPerf
    step_s: float
    """One decode step alone, context aside."""
    attn_s_per_token: float
    """What each context token adds to that step."""


def _config(engine: EnginePerf | ReplicaGroupPerf) -> Config:
    base = engine.decode_step_s(1, 0)
    attn = (engine.decode_step_s(1, 1_000_000) - base) / 1_000_000
    return Config(engine, base, attn)


def server_configs(model: str, gpu_type: str, gpus: int) -> dict[object, Config]:
    """The configurations of ``model`` one server of ``gpus`` x ``gpu_type`` can hold, keyed
    so that the same configuration on two servers counts once."""
    out: dict[object, Config] = {}
    tp = tensor_parallel_degree(model, gpu_type, gpus)
    if tp is not None:
        out["dynamic", gpu_type, tp] = _config(engine_perf(model, gpu_type, tp))
    for tp in TP_DEGREES:
        if tp > min(gpus, MAX_TP):
            continue
        kept_attn = math.inf
        for share in sorted(GPU_SHARES, reverse=True):  # whole GPUs first: cheapest steps
            if not replica_fits(model, gpu_type, tp, share):
                continue
            count = int(gpus // (tp * share))
            config = _config(replica_group_perf(model, gpu_type, tp, share, count))
            if config.attn_s_per_token < kept_attn:  # else a larger share beats it outright
                out["group", gpu_type, tp, share, count] = config
                kept_attn = config.attn_s_per_token
    return out


class AnyDeployment:
    """Per model, every configuration any deployment of ``spec`` can give it (module doc),
    and each call's time alone on the fastest of them."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        per_model: list[dict[object, Config]] = [{} for _ in MODEL_NAMES]
        for server in spec.servers:
            if server.gpu_type is None or server.gpus <= 0:
                continue
            for mi, model in enumerate(MODEL_NAMES):
                per_model[mi].update(server_configs(model, server.gpu_type, server.gpus))
        self.configs: list[tuple[Config, ...]] = [tuple(c.values()) for c in per_model]
        """Per model (``MODEL_NAMES`` order): its configurations; empty where none fits."""
        self.max_core_speed = max((s.core_speed for s in spec.servers), default=0.0)
        self._times: dict[tuple[int, int, int, int], float] = {}

    def llm_time(self, model: int, prompt: int, output: int, prefilled: int | None = None) -> float:
        """Seconds the call takes alone on the fastest configuration of ``model`` (inf if
        none fits); ``prefilled``: the prompt tokens computed (default all)."""
        pre_tokens = prompt if prefilled is None else prefilled
        key = (model, prompt, output, pre_tokens)
        got = self._times.get(key)
        if got is None:
            ctx = prompt + output // 2
            got = min(
                (
                    c.engine.prefill_s(pre_tokens) + output * (c.step_s + c.attn_s_per_token * ctx)
                    for c in self.configs[model]
                ),
                default=math.inf,
            )
            if len(self._times) >= _CACHE_LIMIT:
                self._times.clear()
            self._times[key] = got
        return got


@functools.cache
def any_deployment(spec: ClusterSpec) -> AnyDeployment:
    """The (cached) configurations of ``spec``: every run on one cluster shares them."""
    return AnyDeployment(spec)
