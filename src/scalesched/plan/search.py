"""Allocation search and hierarchical placement.

Search (``strategy="plan"``): greedy marginal analysis over replicas.  Every step adds the
one replica (model, GPU type, tp, share) with the largest drop in predicted mean response
per GPU it takes, among those the cluster can still place.  The objective is a sum of
per-model terms (``pipeline.model_cost``), so after a step only the chosen model's
candidates are re-scored.  Pruning:

* memory fit: a configuration whose weights + KV do not fit its share is never a candidate;
* dominance: per (model, GPU type), a configuration is dropped if another needs no more
  GPUs and has at least its capacity and at most its batch-1 latency;
* throughput lower bound: a model below its required rate scores by the capacity a
  replica adds (its cost is a penalty in need / capacity, so the bottleneck model gains
  most), so every model reaches rate R before any GPU is spent on latency; where the plan
  then predicts less than ``HEADROOM`` times R, the search runs again with ``HEADROOM``
  times R as every model's floor (``_plan_served``);
* the search stops when no placeable replica lowers the predicted mean by more than
  ``MIN_GAIN`` of it per GPU.

Swaps: the greedy order spends the fastest GPUs first on whatever gains most per GPU at
that step, which early on is the small models (a llama-2-7b replica on one H100 GPU), so
the largest model can end up on the slower GPU type. Last, whole servers' replicas are
exchanged between servers of different GPU types and the same GPU count, each exchange
kept where it lowers the predicted mean (``_swap_servers``): on hetero-16 at 12.6
workflows/s, llama-2-70b moved from an A100 to an H100 server and the simulated mean under
``tail`` fell from 29.8 s to 26.9 s.

Restarts: the greedy order never places several replicas of one model ahead of the rest,
so a plan where the largest model holds the fastest servers can be out of its reach (its
first H100 replica gains less per GPU than a small model's). The search therefore runs
again from presets, a model's fastest configuration placed k times first, and the plan
with the lowest predicted mean is kept (``_plan_served``).

Placement (hierarchical, as each replica is added): the tp GPUs of a replica lie in one
server; among the servers of the GPU type that can take it, best fit (the fewest free GPU
quarters left afterwards, so servers fill up and large slots stay whole), ties broken by
fewer replicas of the same model (spread for failure isolation), then server order.  On a
server, replicas of one model share tp and share (the simulator runs them as one group).

Baselines: ``independent`` splits the GPUs between models in proportion to their calls per
workflow, ``uniform`` equally; within its part each model picks, replica by replica, what
best lowers its own predicted latency while that helps (each LLM optimised well, but alone).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from scalesched.cluster.deployment import Replica
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.perf import GPU_SHARES, TP_DEGREES, replica_fits
from scalesched.errors import InputError
from scalesched.plan.pipeline import Curves, Prediction, ReplicaConfig, model_cost, predict
from scalesched.plan.profile import WorkloadProfile

Strategy = Literal["plan", "independent", "uniform"]
MIN_GAIN = 1e-4
"""Stop when the best replica lowers the predicted mean by less than this fraction per GPU."""
_QUARTERS = 4
STARVED = 0.5
"""A configuration whose capacity per GPU is below this share of the model's densest
configuration on the same GPU type is not a candidate: its weights leave too little KV
memory (llama-2-70b on two H100s: 1.1 requests/s against 22.8 on four), so its capacity
is a few requests, and a router's momentary choice of it queues calls the fluid model
does not see (on hetero-4 such replicas held admission waits of minutes)."""
HEADROOM = 1.5
"""After the latency search, idle hardware goes to the model with the least capacity over
its need while that ratio is below this: the fluid model's capacity is reached in
simulation only to about 75-80% (hetero-32, plans for 28-32 workflows/s)."""
_PENALTY = 1e6


class Packing:
    """Free GPU quarters of every GPU server, and the replicas placed so far."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.free: list[list[int]] = [[_QUARTERS] * s.gpus for s in cluster.servers]
        self.by_type: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(cluster.servers):
            if s.gpu_type is not None and s.gpus > 0:
                self.by_type[s.gpu_type].append(i)
        self.config_on: dict[tuple[int, str], ReplicaConfig] = {}
        self.replicas: list[Replica] = []
        self.count_on: dict[tuple[int, str], int] = defaultdict(int)
        self._full: set[tuple[str, int, int]] = set()
        """(gpu type, tp, quarters) known not to fit anywhere (free space only shrinks)."""

    def gpu_types(self) -> list[str]:
        return list(self.by_type)

    def total_gpus(self, gpu_type: str) -> int:
        return sum(self.cluster.servers[i].gpus for i in self.by_type[gpu_type])

    def _slot(self, si: int, tp: int, q: int) -> tuple[int, list[int]] | None:
        """(quarters left on the server afterwards, GPU indices) for a best-fit slot."""
        free = self.free[si]
        fits = sorted((f, g) for g, f in enumerate(free) if f >= q)
        if len(fits) < tp:
            return None
        chosen = [g for _, g in fits[:tp]]
        return sum(free) - tp * q, sorted(chosen)

    def can_place(self, gpu_type: str, tp: int, share: float) -> bool:
        q = round(share * _QUARTERS)
        if (gpu_type, tp, q) in self._full:
            return False
        if any(self._slot(si, tp, q) is not None for si in self.by_type[gpu_type]):
            return True
        self._full.add((gpu_type, tp, q))
        return False

    def place(self, model: str, config: ReplicaConfig) -> bool:
        """Place one replica (best fit, then spread); False if no server can take it."""
        q = round(config.share * _QUARTERS)
        best: tuple[int, int, int, list[int]] | None = None
        for si in self.by_type[config.gpu_type]:
            other = self.config_on.get((si, model))
            if other is not None and other != config:
                continue
            slot = self._slot(si, config.tp, q)
            if slot is None:
                continue
            key = (slot[0], self.count_on[si, model], si, slot[1])
            if best is None or key[:3] < best[:3]:
                best = key
        if best is None:
            return False
        _, _, si, gpus = best
        for g in gpus:
            self.free[si][g] -= q
        self.config_on[si, model] = config
        self.count_on[si, model] += 1
        name = self.cluster.servers[si].name
        self.replicas.append(Replica(model, name, tuple(gpus), config.share))
        return True

    def held(self, si: int) -> list[tuple[str, tuple[int, ...], float]]:
        """(model, GPU indices, share) of each replica on server index ``si``."""
        name = self.cluster.servers[si].name
        return [(r.model, r.gpus, r.share) for r in self.replicas if r.server == name]

    def swap(self, a: int, b: int) -> None:
        """Exchange every replica of servers ``a`` and ``b`` (same GPU count), GPU indices
        kept; the replicas take the other server's GPU type."""
        names = {a: self.cluster.servers[a].name, b: self.cluster.servers[b].name}
        other = {names[a]: names[b], names[b]: names[a]}
        self.replicas = [
            Replica(r.model, other[r.server], r.gpus, r.share) if r.server in other else r
            for r in self.replicas
        ]
        self.free[a], self.free[b] = self.free[b], self.free[a]
        dst = {a: b, b: a}
        moved = {k: self.config_on.pop(k) for k in list(self.config_on) if k[0] in dst}
        counts = {k: self.count_on.pop(k) for k in list(self.count_on) if k[0] in dst}
        for (si, model), c in moved.items():
            there = str(self.cluster.servers[dst[si]].gpu_type)
            self.config_on[dst[si], model] = ReplicaConfig(there, c.tp, c.share)
        for (si, model), n in counts.items():
            self.count_on[dst[si], model] = n
        self._full.clear()  # free space moved between GPU types


def _fitting_configs(model: str, gpu_type: str, max_gpus: int) -> list[ReplicaConfig]:
    """Configurations of ``model`` on ``gpu_type`` with at most ``max_gpus`` GPUs whose
    weights and minimum KV cache fit their share."""
    return [
        ReplicaConfig(gpu_type, tp, share)
        for tp in TP_DEGREES
        if tp <= max_gpus
        for share in GPU_SHARES
        if replica_fits(model, gpu_type, tp, share)
    ]


def candidate_configs(
    model: str, packing: Packing, curves: Curves, starved: float = STARVED
) -> list[ReplicaConfig]:
    """Configurations of ``model`` that fit in memory, with KV-starved ones (capacity per
    GPU below ``starved`` times the densest's on the GPU type) and dominated ones pruned."""
    out: list[ReplicaConfig] = []
    for gpu_type in packing.gpu_types():
        max_gpus = max(packing.cluster.servers[i].gpus for i in packing.by_type[gpu_type])
        configs = _fitting_configs(model, gpu_type, max_gpus)
        stats = {c: curves.get(model, c) for c in configs}
        dense = max((stats[c].capacity / c.gpus for c in configs), default=0.0)
        for c in configs:
            cv = stats[c]
            if cv.capacity / c.gpus < starved * dense:
                continue
            dominated = any(
                d != c
                and d.gpus <= c.gpus
                and stats[d].capacity >= cv.capacity
                and stats[d].latency[0] <= cv.latency[0]
                and (d.gpus, -stats[d].capacity, stats[d].latency[0])
                != (c.gpus, -cv.capacity, cv.latency[0])
                for d in configs
            )
            if not dominated:
                out.append(c)
    return out


@dataclass
class PlanResult:
    strategy: Strategy
    rate_wps: float
    prediction: Prediction
    replicas: list[Replica]
    allocation: dict[str, dict[ReplicaConfig, int]]
    gpus_used: float
    planning_time_s: float
    steps: int
    notes: list[str] = field(default_factory=list)


def _cost(
    curves: Curves,
    model: str,
    counts: dict[ReplicaConfig, int],
    rate: float,
    floor: float = 1.0,
) -> float:
    """model_cost, or below ``floor`` times the model's need (overloaded, at the default
    floor) a penalty in floor x need / capacity: convex, so added capacity goes first to the
    model furthest below its floor (the bottleneck)."""
    need = rate * curves.profile.calls[model].calls_per_workflow
    cap = sum(curves.get(model, k).capacity * n for k, n in counts.items())
    c = model_cost(curves, model, counts, rate) if cap >= floor * need else math.inf
    if math.isfinite(c):
        return c
    return _PENALTY * (1.0 + floor * need / (cap + 1e-3 * need))


def search_plan(
    cluster: ClusterSpec,
    profile: WorkloadProfile,
    rate: float,
    *,
    strategy: Strategy = "plan",
    curves: Curves | None = None,
    slo_mean_s: float | None = None,
) -> PlanResult:
    """The allocation and placement of ``strategy`` for ``profile`` at ``rate`` workflows/s.
    ``slo_mean_s``: the search (``plan``) stops adding replicas once the predicted mean
    response is at most this, so the plan holds the fewest GPUs its greedy order reaches
    that target with (None: it spends GPUs while any lowers the mean)."""
    if rate <= 0:
        raise InputError("--rate", "rate", "must be positive")
    wall = time.perf_counter()
    curves = curves or Curves(profile)
    packing = Packing(cluster)
    if not packing.by_type:
        raise InputError(cluster.name, "servers", "the cluster has no GPU servers")
    models = list(profile.models)
    configs = {m: candidate_configs(m, packing, curves) for m in models}
    for m in models:
        if not configs[m]:
            raise InputError(cluster.name, "servers", f"no GPU server can hold model {m!r}")
    alloc: dict[str, dict[ReplicaConfig, int]] = {m: {} for m in models}
    if slo_mean_s is not None and not slo_mean_s > 0:
        raise InputError("--slo-mean", "slo_mean_s", f"must be positive, got {slo_mean_s}")
    if strategy == "plan":
        packing, alloc, steps = _plan_served(cluster, curves, configs, rate, slo_mean_s)
    else:
        steps = _split(curves, packing, configs, alloc, strategy, profile, rate)
    pred = predict(curves, alloc, rate)
    result = PlanResult(
        strategy=strategy,
        rate_wps=rate,
        prediction=pred,
        replicas=packing.replicas,
        allocation=alloc,
        gpus_used=sum(r.tp * r.share for r in packing.replicas),
        planning_time_s=time.perf_counter() - wall,
        steps=steps,
    )
    unserved = [m for m in models if not alloc[m]]
    if unserved:
        result.notes.append(f"no replica could be placed for {', '.join(unserved)}")
    if not math.isfinite(pred.mean_s):
        result.notes.append(
            f"rate {rate:g}/s exceeds the predicted throughput {pred.throughput_wps:.3g}/s"
        )
    return result


Planned = tuple[Packing, dict[str, dict[ReplicaConfig, int]], int]


def _plan_served(
    cluster: ClusterSpec,
    curves: Curves,
    configs: dict[str, list[ReplicaConfig]],
    rate: float,
    slo_mean_s: float | None = None,
) -> Planned:
    """The plan: the best of several runs of the search (``_plan``), first the plan that
    serves every model, then the plan that holds ``HEADROOM`` times the rate in predicted
    throughput, then the lowest predicted mean. With ``slo_mean_s``, the first run only.

    Runs: the plain search; the search with every model brought to ``HEADROOM`` times its
    need before any GPU goes to latency (the latency search spends the fast GPUs on the
    small models' latency, so the largest model has no room left to grow in the throughput
    phase: on hetero-32 the plain plan for 29 workflows/s predicted 34.3 (1.18x) with 36
    GPUs idle, and `tail` on it did not settle); and restarts from presets (``_presets``):
    a model's fastest configuration placed k times before the search, which it would not
    reach by itself because the greedy order takes one replica at a time by gain per GPU
    (on hetero-16 at 14.13 workflows/s, three llama-2-70b replicas on H100 servers first:
    predicted mean 25.4 s against 31.3 s, simulated under `tail` 27.6 s against 31.9 s).

    Where a run leaves a model without a replica (the only servers its pruned
    configurations fit on went to other models: a 70B model at tp 4 beside one H100
    server's smaller models), the better by predicted mean of two retries stands for it:
    that model placed first, and the search without starvation pruning (the 70B model at
    tp 2 beside the 34B one)."""

    def attempt(
        options: dict[str, list[ReplicaConfig]],
        first: list[str],
        floor: float,
        preset: Preset | None = None,
    ) -> Planned:
        packing = Packing(cluster)
        alloc: dict[str, dict[ReplicaConfig, int]] = {m: {} for m in options}
        options = {m: list(c) for m, c in options.items()}
        steps = _plan(curves, packing, options, alloc, rate, first, slo_mean_s, floor, preset)
        return packing, alloc, steps

    def unserved(plan: Planned) -> list[str]:
        return [m for m, counts in plan[1].items() if not counts]

    def served(floor: float, preset: Preset | None = None) -> Planned:
        plan = attempt(configs, [], floor, preset)
        if not unserved(plan):
            return plan
        loose = {m: candidate_configs(m, plan[0], curves, starved=0.0) for m in configs}
        tries = [attempt(configs, unserved(plan), floor, preset), attempt(loose, [], floor, preset)]
        return min(tries, key=lambda p: (len(unserved(p)), predict(curves, p[1], rate).mean_s))

    plan = served(1.0)
    if slo_mean_s is not None:
        return plan
    tries = [plan, served(HEADROOM)]
    tries += [served(floor, preset) for floor, preset in _presets(curves, configs, rate)]

    def rank(p: Planned) -> tuple[int, bool, float]:
        """Serves every model, then holds the headroom, then the lowest predicted mean."""
        pred = predict(curves, p[1], rate)
        return (len(unserved(p)), pred.throughput_wps < HEADROOM * rate, pred.mean_s)

    return min(tries, key=rank)


Preset = tuple[str, ReplicaConfig, int]
"""(model, configuration, count): replicas placed before the greedy search starts."""
PRESET_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
"""Preset counts tried, as fractions of the replicas of a model's fastest configuration
that would carry its need (at the floor) alone."""


def _presets(
    curves: Curves, configs: dict[str, list[ReplicaConfig]], rate: float
) -> list[tuple[float, Preset]]:
    """(floor, preset) of every restart: per model, its fastest configuration (lowest
    batch-1 latency, then most capacity) placed k times first, for k a fraction
    (``PRESET_FRACTIONS``) of the count that alone would carry its need at the floor, and
    both floors (1 and ``HEADROOM``)."""
    out: list[tuple[float, Preset]] = []
    for m, options in configs.items():
        need = rate * curves.profile.calls[m].calls_per_workflow
        if not options or need <= 0:
            continue
        fast = min(options, key=lambda c: (curves.get(m, c).latency[0], -curves.get(m, c).capacity))
        for floor in (1.0, HEADROOM):
            alone = math.ceil(floor * need / curves.get(m, fast).capacity)
            for k in sorted({max(1, round(f * alone)) for f in PRESET_FRACTIONS}):
                out.append((floor, (m, fast, k)))
    return out


def _plan(
    curves: Curves,
    packing: Packing,
    configs: dict[str, list[ReplicaConfig]],
    alloc: dict[str, dict[ReplicaConfig, int]],
    rate: float,
    first: list[str],
    slo_mean_s: float | None = None,
    floor: float = 1.0,
    preset: Preset | None = None,
) -> int:
    """The latency search, then the throughput phase; ``preset``'s replicas are placed
    first (as many of its count as fit), then the models of ``first`` get their
    densest placeable configuration before either (without pruned configurations, a 70B
    model may fit only whole servers that smaller models would otherwise take first). With
    a mean target (``slo_mean_s``) the plan holds the fewest GPUs that reach it: no
    throughput phase. ``floor``: the capacity, in multiples of each model's need, the
    search brings every model to before it spends GPUs on latency."""
    steps = 0
    if preset is not None:
        model, config, count = preset
        while steps < count and packing.place(model, config):
            alloc[model][config] = alloc[model].get(config, 0) + 1
            steps += 1
    for m in first:
        for c in sorted(configs[m], key=lambda c: -curves.get(m, c).capacity / c.gpus):
            if packing.place(m, c):
                alloc[m][c] = 1
                steps += 1
                break
    steps += _greedy(curves, packing, configs, alloc, rate, slo_mean_s, floor)
    if slo_mean_s is None:
        steps += _headroom(curves, packing, configs, alloc, rate)
    return steps + _swap_servers(curves, packing, alloc, rate)


def _greedy(
    curves: Curves,
    packing: Packing,
    configs: dict[str, list[ReplicaConfig]],
    alloc: dict[str, dict[ReplicaConfig, int]],
    rate: float,
    slo_mean_s: float | None = None,
    floor: float = 1.0,
) -> int:
    cost = {m: _cost(curves, m, alloc[m], rate, floor) for m in configs}
    best_of: dict[str, tuple[float, ReplicaConfig] | None] = {}

    def rescore(m: str) -> None:
        best: tuple[float, ReplicaConfig] | None = None
        for c in configs[m]:
            if not packing.can_place(c.gpu_type, c.tp, c.share):
                continue
            trial = dict(alloc[m])
            trial[c] = trial.get(c, 0) + 1
            gain = (cost[m] - _cost(curves, m, trial, rate, floor)) / c.gpus
            if best is None or gain > best[0]:
                best = (gain, c)
        best_of[m] = best

    for m in configs:
        rescore(m)
    steps = 0
    while True:
        options = [(v[0], m, v[1]) for m, v in best_of.items() if v is not None]
        if not options:
            break
        gain, m, c = max(options, key=lambda o: o[0])
        total = sum(cost.values())
        if gain <= MIN_GAIN * total:
            break
        if not packing.place(m, c):
            # Every server with room holds m in another configuration; free space only
            # shrinks and configurations never change, so c stays unplaceable for m.
            configs[m].remove(c)
            rescore(m)
            continue
        alloc[m][c] = alloc[m].get(c, 0) + 1
        cost[m] = _cost(curves, m, alloc[m], rate, floor)
        steps += 1
        if slo_mean_s is not None and predict(curves, alloc, rate).mean_s <= slo_mean_s:
            break  # the target is met: the rest of the GPUs stay free
        for k in configs:  # free space shrank: candidates of other models may no longer fit
            if k == m or (best_of[k] is not None and not _placeable(packing, best_of[k])):
                rescore(k)
    return steps


def _headroom(
    curves: Curves,
    packing: Packing,
    configs: dict[str, list[ReplicaConfig]],
    alloc: dict[str, dict[ReplicaConfig, int]],
    rate: float,
) -> int:
    """The throughput phase: while some model's capacity is below ``HEADROOM`` times its
    need, give the one with the least headroom its densest placeable configuration (most
    capacity per GPU). The latency search leaves slow GPUs idle (an L4 replica of llama-2-7b
    is slower than a busy H100 one, so it lowers the predicted mean by nothing); here they
    take traffic off the fast GPUs near saturation. An added replica never raises the
    predicted mean: the equilibrium sends nothing to a replica slower than the rest."""
    steps = 0
    while True:
        best: tuple[float, str, ReplicaConfig] | None = None
        for m, options in configs.items():
            need = rate * curves.profile.calls[m].calls_per_workflow
            cap = sum(curves.get(m, c).capacity * n for c, n in alloc[m].items())
            fits = [c for c in options if packing.can_place(c.gpu_type, c.tp, c.share)]
            if need <= 0 or cap >= HEADROOM * need or not fits:
                continue
            dense = max(fits, key=lambda c: (curves.get(m, c).capacity / c.gpus, c.gpus))
            if best is None or cap / need < best[0]:
                best = (cap / need, m, dense)
        if best is None:
            return steps
        _, m, c = best
        if packing.place(m, c):
            alloc[m][c] = alloc[m].get(c, 0) + 1
            steps += 1
        else:  # every server with room holds m in another configuration (as in _greedy)
            configs[m].remove(c)


MAX_SWAPS = 64
"""Most exchanges the swap phase makes (each strictly lowers the predicted mean, so
it ends anyway; the bound keeps a pathological cluster's planning time in check)."""


def _swap_servers(
    curves: Curves, packing: Packing, alloc: dict[str, dict[ReplicaConfig, int]], rate: float
) -> int:
    """The swap phase: while exchanging every replica of one GPU server with every replica
    of another (same GPU count, different GPU type) lowers the predicted mean at ``rate``,
    make the exchange that lowers it most. Servers with the same GPU type and replicas are
    interchangeable, so one pair per class is tried. An exchange must keep every replica
    fitting its new GPU type and not KV-starved, and the predicted throughput at least
    ``min(before, HEADROOM * rate)``. Returns the exchanges made."""
    steps = 0
    now = predict(curves, alloc, rate)
    while steps < MAX_SWAPS and math.isfinite(now.mean_s):
        best: tuple[Prediction, int, int, dict[str, dict[ReplicaConfig, int]]] | None = None
        floor = min(now.throughput_wps, HEADROOM * rate)
        for a, b in _swap_pairs(packing):
            trial = _swapped(curves, packing, alloc, a, b)
            if trial is None:
                continue
            pred = predict(curves, trial, rate)
            if pred.throughput_wps < floor or not pred.mean_s < now.mean_s * (1 - MIN_GAIN):
                continue
            if best is None or pred.mean_s < best[0].mean_s:
                best = (pred, a, b, trial)
        if best is None:
            return steps
        now, a, b, trial = best
        packing.swap(a, b)
        alloc.clear()
        alloc.update(trial)
        steps += 1
    return steps


def _swap_pairs(packing: Packing) -> list[tuple[int, int]]:
    """One server index pair per pair of classes (GPU type, GPU count, replicas held) that
    differ in GPU type and share the GPU count."""
    classes: dict[tuple[str, int, tuple[tuple[str, tuple[int, ...], float], ...]], int] = {}
    for si, s in enumerate(packing.cluster.servers):
        if s.gpu_type is None or s.gpus <= 0:
            continue
        key = (s.gpu_type, s.gpus, tuple(sorted(packing.held(si))))
        classes.setdefault(key, si)
    reps = list(classes.items())
    return [
        (a, b)
        for i, (ka, a) in enumerate(reps)
        for kb, b in reps[i + 1 :]
        if ka[0] != kb[0] and ka[1] == kb[1] and (ka[2] or kb[2])
    ]


def _swapped(
    curves: Curves,
    packing: Packing,
    alloc: dict[str, dict[ReplicaConfig, int]],
    a: int,
    b: int,
) -> dict[str, dict[ReplicaConfig, int]] | None:
    """``alloc`` with servers ``a`` and ``b``'s replicas exchanged; None where one would not
    fit, or be KV-starved on, its new GPU type."""
    trial = {m: dict(counts) for m, counts in alloc.items()}
    types = {a: packing.cluster.servers[a].gpu_type, b: packing.cluster.servers[b].gpu_type}
    for src, dst in ((a, b), (b, a)):
        for model, gpus, share in packing.held(src):
            tp = len(gpus)
            old = ReplicaConfig(str(types[src]), tp, share)
            new = ReplicaConfig(str(types[dst]), tp, share)
            gpus_there = packing.cluster.servers[dst].gpus
            if not replica_fits(model, new.gpu_type, tp, share) or _starved(
                curves, model, new, gpus_there
            ):
                return None
            trial[model][old] -= 1
            if trial[model][old] == 0:
                del trial[model][old]
            trial[model][new] = trial[model].get(new, 0) + 1
    return trial


def _starved(curves: Curves, model: str, config: ReplicaConfig, max_gpus: int) -> bool:
    """Whether ``config``'s capacity per GPU is below ``STARVED`` times the densest
    configuration of ``model`` on its GPU type with at most ``max_gpus`` GPUs (as
    ``candidate_configs`` prunes)."""
    dense = max(
        curves.get(model, c).capacity / c.gpus
        for c in _fitting_configs(model, config.gpu_type, max_gpus)
    )
    return curves.get(model, config).capacity / config.gpus < STARVED * dense


def _placeable(packing: Packing, best: tuple[float, ReplicaConfig] | None) -> bool:
    return best is not None and packing.can_place(best[1].gpu_type, best[1].tp, best[1].share)


def _split(
    curves: Curves,
    packing: Packing,
    configs: dict[str, list[ReplicaConfig]],
    alloc: dict[str, dict[ReplicaConfig, int]],
    strategy: Strategy,
    profile: WorkloadProfile,
    rate: float,
) -> int:
    """The baselines: models take turns (the one furthest below its fixed share of the GPUs
    first), each adding the replica that best lowers *its own* predicted latency per GPU,
    while it helps and its share lasts: every LLM optimised well, but independently."""
    total = sum(packing.total_gpus(t) for t in packing.gpu_types())
    calls = {m: profile.calls[m].calls_per_workflow for m in configs}
    weight: Callable[[str], float] = (
        (lambda m: calls[m] / sum(calls.values()))
        if strategy == "independent"
        else (lambda m: 1.0 / len(calls))
    )
    used = dict.fromkeys(configs, 0.0)
    active = set(configs)
    steps = 0
    while active:
        m = max(active, key=lambda k: (weight(k) * total - used[k], k))
        now = _cost(curves, m, alloc[m], rate)
        options = []
        for c in configs[m]:
            if packing.can_place(c.gpu_type, c.tp, c.share):
                trial = {**alloc[m], c: alloc[m].get(c, 0) + 1}
                options.append(((now - _cost(curves, m, trial, rate)) / c.gpus, c))
        placed = False
        for gain, c in sorted(options, key=lambda o: -o[0]):
            if used[m] >= weight(m) * total or gain <= MIN_GAIN * now:
                break  # its share of the GPUs is spent, or more would not help it
            if packing.place(m, c):
                alloc[m][c] = alloc[m].get(c, 0) + 1
                used[m] += c.gpus
                placed, steps = True, steps + 1
                break
        if not placed:
            active.discard(m)
    return steps
