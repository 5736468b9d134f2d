"""The capacity-aware bound over allocations: the program of ``eval.headroom.bound`` with
every configuration any deployment of the cluster could pin as its engine classes and the
allocation of the cluster's GPUs to them as variables. The deployment planner's fluid
relaxation, made a bound: it holds for every deployment (every allocation of GPUs to
replica groups, and dynamic residency), so it is what no deployment and no scheduler can
beat at the offered rate.

The configurations are ``cluster.anywhere``'s, per server shape (GPU type x GPUs per
server): dynamic residency's engine, and every replica group a deployment file can pin
there (each tensor-parallel degree ``tp``, share ``s`` and replica count ``c`` that fit).
Giving each its own class would multiply the program's columns by tens; instead one class
per model and server shape holds them all, measured per GPU, and takes the most favourable
figure of its members for each quantity it bounds (each is a valid bound alone, so their
combination is one too; module doc of ``bound`` for why each row holds):

* duration: a call's prefill and own attention are the least over the members
  (``anywhere``'s configurations: a smaller share or count is never faster alone); its
  decode step seen is bounded below by the hull below;
* decode capacity, in GPU-seconds: a group of ``c`` replicas of ``g = tp s`` GPUs holds
  ``c g`` GPUs, so it gives ``c g`` GPU-seconds per second and a request's share of a step
  of ``b`` costs ``c g lin_c[b] / b`` (``lin_c[b]``: one replica's step at ``ceil(b / c)``,
  as ``perf.ReplicaGroupPerf`` computes it; the dynamic engine is one replica of ``tp``
  GPUs). The class's hull (``batch_levels``) is the lower-left hull of every member's
  points (seen, GPU-cost), so every step of every member lies on or above each edge; its
  own attention costs the least GPU-seconds per context token of any member;
* KV and slots, per GPU: the most KV tokens and batch slots any member holds per GPU it
  uses, and a call holds at least the smallest member's KV (or its own, if smaller).

Residency: the GPUs each class holds on each server shape, ``g >= 0``, with one GPU row
per shape, ``sum g <= servers x GPUs``. Every deployment satisfies it (a replica group of
``tp`` at share ``s`` with ``c`` replicas holds ``c tp s`` GPUs of its server; a dynamic
engine resident a fraction ``x`` of the time holds ``tp x`` on average). So every
schedule on every deployment is a solution here (``bound``'s argument, each class's
figures no worse than its members'), and a deployment's own program maps into this one
(its classes into the classes of their shape; a class's hull runs on flat at its least
cost to where its last member's own hull ends, so every seen a member allows is the
class's too): this bound is at most that one's.
Exactly so where every call's rows hold every hull edge; with ``CALL_FACETS`` each program
keeps its own subset for the fan-out calls (the tests find the order holds within 1e-6).
Per-server rows (a group cannot span servers) are left out, loosening only.

Each call's duration is also at least its time alone on the fastest configuration
(``decompose.alone_anywhere``): the merged class's least prefill, least attention and
least step come from different members, and that row keeps the bound at or above the
any-deployment bound.

Left out (each only loosens the bound): everything ``bound`` leaves out, the per-server
rows, and the members' differences within a class beyond the figures above (a class
is as fast alone as its fastest member and as cheap per GPU as its cheapest at once).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalesched.cluster.anywhere import AnyDeployment, Config, any_deployment, server_configs
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
from scalesched.cluster.tables import MAX_BATCH_TABLE, MODEL_NAMES, ClusterTables
from scalesched.eval.headroom.bound import (
    CALL_FACETS,
    CapacityBound,
    Residency,
    _Program,
    lower_left_hull,
    smallest_calls,
    solve_whole,
)
from scalesched.eval.headroom.decompose import NO_REUSE, Reuse, alone_anywhere
from scalesched.eval.headroom.lagrange import SAMPLE_WORKFLOWS, priced_bound
from scalesched.workload.instance import Job, TaskInstance


@dataclass(frozen=True)
class Family:
    """Replica groups of one (tp, share) at every count the server holds, or dynamic
    residency's engine (count 1): what each contributes to its class's hull and capacity."""

    lin: np.ndarray
    """One replica's decode step at batch ``b`` (index ``b``, 0..``MAX_BATCH_TABLE``),
    context aside."""
    attn: float
    """One replica's step seconds per context token."""
    gpus: float
    """GPUs one replica holds (``tp x share``)."""
    kv: float
    """KV tokens one replica holds."""
    batch: tuple[int, ...]
    """Batch cap of the group of ``c`` replicas, at index ``c - 1``."""

    def points(self, min_ctx: int, min_need: int) -> tuple[np.ndarray, np.ndarray, float]:
        """(seen, GPU-seconds per request-step) of every step a request can decode in, on
        every count: ``bound.batch_levels``'s points, the cost times the GPUs held; and the
        largest seen at which any count's own hull ends (its cheapest point)."""
        seen, cost, end = [], [], 0.0
        for c, cap in enumerate(self.batch, start=1):
            top = max(1, min(cap, int(self.kv * c) // max(1, min_need)))
            b = np.arange(1, top + 1)
            lin = self.lin[np.minimum(-(-b // c), MAX_BATCH_TABLE)]
            seen.append(lin + self.attn / c * (b - 1) * min_ctx)
            cost.append(self.gpus * c * lin / b)
            order = np.lexsort((seen[-1], cost[-1]))  # cheapest first, then least seen
            end = max(end, float(seen[-1][order[0]]))
        return np.concatenate(seen), np.concatenate(cost), end


def _lin(engine: EnginePerf | ReplicaGroupPerf) -> np.ndarray:
    lin = np.zeros(MAX_BATCH_TABLE + 1)
    lin[1:] = [engine.decode_step_s(b, 0) for b in range(1, MAX_BATCH_TABLE + 1)]
    return lin


def _attn(engine: EnginePerf | ReplicaGroupPerf) -> float:
    base = engine.decode_step_s(1, 0)
    return (engine.decode_step_s(1, 1_000_000) - base) / 1_000_000


@functools.cache
def families(model: str, gpu_type: str, gpus: int) -> tuple[Family, ...]:
    """Every engine a deployment can give ``model`` on a server of ``gpus`` x
    ``gpu_type`` (``cluster.anywhere``'s enumeration, every replica count included; cached:
    a thousand decode steps tabulated per family)."""
    out = []
    tp = tensor_parallel_degree(model, gpu_type, gpus)
    if tp is not None:
        engine = engine_perf(model, gpu_type, tp)
        kv = float(engine.kv_capacity_tokens)
        out.append(Family(_lin(engine), _attn(engine), float(tp), kv, (engine.max_batch,)))
    for tp in TP_DEGREES:
        if tp > min(gpus, MAX_TP):
            continue
        for share in GPU_SHARES:
            if not replica_fits(model, gpu_type, tp, share):
                continue
            counts = range(1, int(gpus // (tp * share)) + 1)
            groups = [replica_group_perf(model, gpu_type, tp, share, c) for c in counts]
            one = groups[0]
            batch = tuple(int(g.max_batch) for g in groups)
            kv = float(one.kv_capacity_tokens)
            out.append(Family(_lin(one), _attn(one), tp * share, kv, batch))
    return tuple(out)


@dataclass(frozen=True)
class AllocationClass:
    """One model's engines on one server shape, as one class measured per GPU (module
    doc)."""

    model: int
    pool: int
    """Index of the server shape (``Allocations.pools``)."""
    configs: tuple[Config, ...]
    """``anywhere``'s configurations there: the call's least prefill and attention."""
    families: tuple[Family, ...]

    @property
    def own_attn(self) -> float:
        """Least GPU-seconds a context token's attention costs a step."""
        return min(f.gpus * f.attn for f in self.families)

    @property
    def kv_per_gpu(self) -> float:
        return max(f.kv / f.gpus for f in self.families)

    @property
    def slots_per_gpu(self) -> float:
        return max(b / (f.gpus * c) for f in self.families for c, b in enumerate(f.batch, 1))

    @property
    def kv_cap(self) -> float:
        """KV tokens a call holds at least (its own, if fewer)."""
        return min(f.kv for f in self.families)

    def levels(self, min_ctx: int, min_need: int) -> np.ndarray:
        """The hull of every member's (seen, GPU-cost) points (``bound.batch_levels``),
        extended flat at its least cost to where the last member's own hull ends: a call
        may see up to that on its member, and no step costs less than the least."""
        points = [f.points(min_ctx, min_need) for f in self.families]
        seen = np.concatenate([p[0] for p in points])
        hull = lower_left_hull(seen, np.concatenate([p[1] for p in points]))
        end = max(p[2] for p in points)
        if end > hull[-1, 0]:
            hull = np.vstack([hull, [end, hull[-1, 1]]])
        return hull


class Allocations:
    """The classes and server shapes of one cluster (module doc)."""

    def __init__(self, tables: ClusterTables) -> None:
        spec = tables.spec
        shapes: dict[tuple[str, int], int] = {}
        for server in spec.servers:
            if server.gpu_type is not None and server.gpus > 0:
                key = (server.gpu_type, server.gpus)
                shapes[key] = shapes.get(key, 0) + 1
        self.pools: list[tuple[str, int, float]] = [
            (gpu, gpus, float(count * gpus)) for (gpu, gpus), count in shapes.items()
        ]
        """Per server shape: (GPU type, GPUs per server, GPUs of all its servers)."""
        self.classes: list[AllocationClass] = []
        for p, (gpu, gpus, _) in enumerate(self.pools):
            for m, model in enumerate(MODEL_NAMES):
                fams = families(model, gpu, gpus)
                if fams:
                    configs = tuple(server_configs(model, gpu, gpus).values())
                    self.classes.append(AllocationClass(m, p, configs, fams))
        self.anywhere: AnyDeployment = any_deployment(spec)

    def by_model(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {m: [] for m in range(len(MODEL_NAMES))}
        for k, cls in enumerate(self.classes):
            out[cls.model].append(k)
        return out

    def residency(self) -> Residency:
        """GPUs per class and server shape, one GPU row per shape (module doc)."""
        upper: dict[Hashable, float] = {}
        rows: list[tuple[tuple[Any, ...], list[tuple[Hashable, float]], float]] = []
        for p, (_, _, total) in enumerate(self.pools):
            keys: list[Hashable] = [(p, k) for k, c in enumerate(self.classes) if c.pool == p]
            upper.update(dict.fromkeys(keys, total))
            if keys:
                rows.append((("gpu", p), [(key, 1.0) for key in keys], total))
        return Residency(
            upper,
            rows,
            {k: [(c.pool, k)] for k, c in enumerate(self.classes)},
            {k: c.kv_per_gpu for k, c in enumerate(self.classes)},
            {k: c.slots_per_gpu for k, c in enumerate(self.classes)},
        )


class _AllocationProgram(_Program):
    """``bound._Program`` over the allocation classes (module doc)."""

    def __init__(
        self,
        alloc: Allocations,
        tables: ClusterTables,
        levels: dict[int, np.ndarray],
        call_facets: int,
        reuse: Reuse,
    ) -> None:
        super().__init__(tables, alloc.by_model(), levels, call_facets, reuse)
        self.alloc = alloc

    def class_costs(self, k: int, prefilled: int, ctx: int, out: int) -> tuple[float, float, float]:
        cls = self.alloc.classes[k]
        fixed = min(
            c.engine.prefill_s(prefilled) + out * c.attn_s_per_token * ctx for c in cls.configs
        )
        return fixed, cls.own_attn * ctx, cls.kv_cap

    def fastest(self, task: TaskInstance) -> float:
        return alone_anywhere(self.alloc.anywhere, task, self.reuse)

    def residency(self) -> Residency:
        return self.alloc.residency()

    def duration(
        self, task: TaskInstance, own_share: bool = False
    ) -> tuple[list[tuple[int, float]], float]:
        """``_Program.duration``, and at least the call alone on its fastest configuration
        (module doc): a column ``d`` >= both."""
        terms, const = super().duration(task, own_share)
        if not terms:
            return terms, const
        d = self.var()
        self.geq([(d, 1.0)] + [(c, -a) for c, a in terms], const)
        self.geq([(d, 1.0)], self.fastest(task))
        return [(d, 1.0)], 0.0


def allocation_bound(
    tables: ClusterTables,
    window: Sequence[Job],
    offered_rate_wps: float,
    run_jobs: Sequence[Job] | None = None,
    *,
    sample: int = SAMPLE_WORKFLOWS,
    call_facets: int = CALL_FACETS,
    reuse: Reuse = NO_REUSE,
    time_limit_s: float | None = None,
) -> CapacityBound:
    """The bound over every allocation of ``tables``' cluster (module doc; any world of
    the cluster: only its servers are read) for ``window`` arriving at
    ``offered_rate_wps``; the other arguments are ``lagrange.lagrangian_capacity_bound``'s
    (``sample`` 0: the whole program, however large the window)."""
    started = time.perf_counter()
    if sample < 0:
        raise ValueError(f"sample must be >= 0, got {sample}")
    if call_facets < 0:
        raise ValueError(f"call_facets must be >= 0, got {call_facets}")
    if not window or not offered_rate_wps > 0 or not math.isfinite(offered_rate_wps):
        return CapacityBound(None, "no measured workflows", 0.0, 0, call_facets=call_facets)
    alloc = Allocations(tables)
    ctx, need = smallest_calls(run_jobs or window, reuse)
    levels = {
        k: c.levels(ctx.get(c.model, 0), need.get(c.model, 1)) for k, c in enumerate(alloc.classes)
    }

    def make() -> _Program:
        return _AllocationProgram(alloc, tables, levels, call_facets, reuse)

    if sample == 0 or len(window) <= sample:
        return solve_whole(make(), window, offered_rate_wps, time_limit_s, started)
    return priced_bound(make, window, offered_rate_wps, sample, time_limit_s)
