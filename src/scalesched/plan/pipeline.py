"""The Aggregate LLM Pipeline: allocation -> predicted throughput and latency, in microseconds.

An allocation gives each model a count of replicas per configuration (GPU type, tp, share).
Per replica configuration, a continuous-batching engine at request rate ``lam`` settles at
the batch ``b`` where Little's law closes, ``b = lam * R(b)`` with
``R(b) = E[prefill] + E[output] * step(b)`` from the same cost model the simulator runs;
its capacity is ``b_max / R(b_max)`` (``b_max``: the batch cap or the KV memory).  Requests
that find the batch full wait (Allen-Cunneen's M/G/c approximation with ``b_max`` slots and
the service time's squared coefficient of variation: LLM outputs are far from exponential).

The congestion a call meets, its slowdown over running alone plus its admission wait, is
``CONGESTION_SHARE`` of what this fluid, size-blind model gives: the routers the plans run
under (``tail``, ``eft``) see every call's expected size and every replica's batch, so short
calls fill the replicas whose KV memory is tight and momentary peaks are steered around.
The share was fitted on the fitting mixes of ``research/plan_accuracy.py`` and checked on
mixes held out from it (docs/planning-accuracy.md).

A model's traffic splits over its replicas so that every replica in use has the same mean
latency (the equilibrium an earliest-finish router approaches), and the workflow composes
the models by their shares of its critical path (``profile.WorkloadProfile``): each model's prefill
seconds scale by the allocation's prefill speed relative to the reference engine, its
output tokens by the per-token step time at the settled batch, and each call adds the
model's admission wait.  Throughput is the bottleneck model's capacity over its calls per
workflow.  Not modelled: CPU contention of tools, data transfers, burstiness of fan-outs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalesched.cluster.perf import DEFAULT_MAX_BATCH, ReplicaGroupPerf, replica_group_perf
from scalesched.plan.profile import ModelCalls, WorkloadProfile


@dataclass(frozen=True, slots=True, order=True)
class ReplicaConfig:
    gpu_type: str
    tp: int
    share: float

    @property
    def gpus(self) -> float:
        return self.tp * self.share

    def __str__(self) -> str:
        return f"{self.gpu_type} tp{self.tp} x{self.share:g}"


Allocation = Mapping[str, Mapping[ReplicaConfig, int]]
"""model -> replica configuration -> replica count."""


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """One replica at a request rate."""

    batch: float
    """The fluid decoding batch: ``lam * E[output] * fluid_step_s`` (Little's law)."""
    latency_s: float
    """Mean seconds per request in the engine (prefill + decode), no admission wait."""
    step_s: float
    """Seconds per output token a call sees: the batch-1 step plus ``CONGESTION_SHARE`` of
    the fluid batch's slowdown over it."""
    wait_s: float
    """Mean admission wait (batch or KV memory full), times ``CONGESTION_SHARE``."""
    utilisation: float
    fluid_step_s: float
    """Seconds per output token at the fluid batch."""


class ReplicaCurve:
    """Latency and throughput of one replica of ``model`` in ``config`` against its batch."""

    def __init__(self, calls: ModelCalls, config: ReplicaConfig) -> None:
        perf: ReplicaGroupPerf = replica_group_perf(
            calls.model, config.gpu_type, config.tp, config.share
        )
        self.config = config
        self.perf = perf
        prefill = np.array([perf.prefill_s(int(p)) for p in calls.prompt[:_CALL_SAMPLE]])
        self.prefill_mean_s = float(prefill.mean())
        out, ctx = calls.mean_output, calls.busy_context
        self.mean_output = out
        kv_bound = int(perf.kv_capacity_tokens // max(1.0, calls.busy_kv))
        self.b_max = max(1, min(DEFAULT_MAX_BATCH, kv_bound))
        b = np.arange(1, self.b_max + 1)
        self.step = np.array([perf.decode_step_s(int(k), int(k * ctx)) for k in b])
        self.latency = self.prefill_mean_s + out * self.step
        # The step runs the *decoding* requests (prefill happens beside it, as in the
        # simulator): at decoding batch b the replica completes b / (out * step(b)) per s.
        self.throughput = np.maximum.accumulate(b / (out * self.step))
        self.capacity = float(self.throughput[-1])
        """Requests per second the replica sustains."""
        self.service_scv = service_scv(
            prefill, calls.output[: prefill.size].astype(float), float(self.step[-1])
        )
        """Squared coefficient of variation of a call's time in a full batch."""
        # latency (with the admission wait) against rate, for the router's equilibrium
        near = _NEAR_FULL * self.capacity
        inner = self.throughput[self.throughput < near]
        rates = np.concatenate(([0.0], inner, [near]))
        lat = [float(self.latency[0])]
        for lam in rates[1:]:
            op = self.at_rate(float(lam))
            assert op is not None
            lat.append(op.latency_s + op.wait_s)
        self._eq_rates = rates
        self._eq_latency = np.maximum.accumulate(np.array(lat))

    def rate_at_latency(self, level: float) -> float:
        """The rate at which a request's mean latency here reaches ``level`` (0 if it is
        slower than that even alone; at most just below capacity)."""
        if level <= self._eq_latency[0]:
            return 0.0
        return float(np.interp(level, self._eq_latency, self._eq_rates))

    def at_rate(self, lam: float) -> OperatingPoint | None:
        """The settled operating point at ``lam`` requests/s; None at or above capacity."""
        if lam >= self.capacity:
            return None
        x = self.throughput
        if lam <= x[0]:
            step = float(self.step[0])
            batch = lam * self.mean_output * step
        else:
            k = int(np.searchsorted(x, lam))  # x[k-1] < lam <= x[k]
            frac = (lam - x[k - 1]) / max(x[k] - x[k - 1], 1e-12)
            batch = k + frac  # batch sizes are 1-based: x[k] is batch k + 1
            step = batch / (lam * self.mean_output)  # Little's law on the decoding batch
        step1 = float(self.step[0])
        seen = step1 + CONGESTION_SHARE * (step - step1)
        latency = self.prefill_mean_s + self.mean_output * seen
        rho = lam / self.capacity
        wait = mgc_wait(rho, self.b_max, float(self.latency[-1]), self.service_scv)
        return OperatingPoint(batch, latency, seen, CONGESTION_SHARE * wait, rho, step)


CONGESTION_SHARE = 0.6
"""Share of the fluid model's congestion (slowdown over batch 1, admission wait) a call
meets under an earliest-finish router; fitted on the fitting mixes only (module docstring)."""
_NEAR_FULL = 0.999
_EQ_ITERATIONS = 40
_CALL_SAMPLE = 400
"""Calls whose prefill times a curve averages (and whose service SCV it takes)."""


def mmc_wait(rho: float, c: int, service_s: float) -> float:
    """Mean M/M/c queueing delay (Sakasegawa's approximation: exact for c = 1)."""
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    return rho ** (math.sqrt(2 * (c + 1)) - 1) / (c * (1 - rho)) * service_s


def mgc_wait(rho: float, c: int, service_s: float, scv: float) -> float:
    """Mean M/G/c queueing delay (Allen-Cunneen): the M/M/c delay scaled by
    ``(1 + scv) / 2``, ``scv`` the service time's squared coefficient of variation.  Exact
    for M/G/1 (Pollaczek-Khinchine): M/D/1 waits half as long as M/M/1."""
    return 0.5 * (1.0 + scv) * mmc_wait(rho, c, service_s)


def service_scv(prefill_s: np.ndarray, output: np.ndarray, step_s: float) -> float:
    """SCV of a call's time in the engine, ``prefill + output * step_s``, over sampled
    calls: how much it varies at a fixed per-token step (outputs are heavy-tailed)."""
    service = prefill_s + np.maximum(1.0, output) * step_s
    mean = float(service.mean())
    return float(service.var() / (mean * mean)) if mean > 0 else 0.0


class Curves:
    """ReplicaCurve per (model, config), built on first use for one workload profile."""

    def __init__(self, profile: WorkloadProfile) -> None:
        self.profile = profile
        self._cache: dict[tuple[str, ReplicaConfig], ReplicaCurve] = {}

    def get(self, model: str, config: ReplicaConfig) -> ReplicaCurve:
        key = (model, config)
        curve = self._cache.get(key)
        if curve is None:
            curve = self._cache[key] = ReplicaCurve(self.profile.calls[model], config)
        return curve


@dataclass(frozen=True, slots=True)
class ModelPoint:
    """A model's traffic-weighted operating point under an allocation."""

    capacity_rps: float
    prefill_ratio: float
    """Mean prefill seconds relative to the reference engine."""
    step_s: float
    wait_s: float
    latency_s: float
    """Mean seconds per call, including the admission wait."""
    utilisation: float


def model_point(
    curves: Curves, model: str, counts: Mapping[ReplicaConfig, int], lam: float
) -> ModelPoint | None:
    """Where ``model`` settles at ``lam`` calls/s on ``counts`` replicas; None if overloaded."""
    items = [(curves.get(model, c), n) for c, n in counts.items() if n > 0]
    cap = sum(cv.capacity * n for cv, n in items)
    if not items or lam >= _NEAR_FULL * cap:
        return None
    split = _equilibrium(items, lam)
    prefill = step = wait = latency = 0.0
    for (cv, n), lam_c in zip(items, split, strict=True):
        if lam_c <= 0:
            continue
        weight = n * lam_c / lam
        op = cv.at_rate(lam_c)
        assert op is not None
        prefill += weight * cv.prefill_mean_s
        step += weight * op.step_s
        wait += weight * op.wait_s
        latency += weight * (op.latency_s + op.wait_s)
    ref = curves.profile.ref_prefill_mean_s[model]
    return ModelPoint(cap, prefill / ref if ref > 0 else 1.0, step, wait, latency, lam / cap)


def _equilibrium(items: list[tuple[ReplicaCurve, int]], lam: float) -> list[float]:
    """Per-replica rates that split ``lam`` so that every replica in use has the same mean
    latency and none unused is faster (a Wardrop equilibrium: what a router that sends each
    request to its earliest finish approaches).  Bisection on the common latency."""
    if lam <= 0:
        return [0.0] * len(items)
    lo = min(float(cv._eq_latency[0]) for cv, _ in items)
    hi = max(float(cv._eq_latency[-1]) for cv, _ in items)
    for _ in range(_EQ_ITERATIONS):
        mid = 0.5 * (lo + hi)
        if sum(n * cv.rate_at_latency(mid) for cv, n in items) < lam:
            lo = mid
        else:
            hi = mid
    rates = [cv.rate_at_latency(hi) for cv, _ in items]
    total = sum(n * r for (_, n), r in zip(items, rates, strict=True))
    return [r * lam / total for r in rates]  # close the last bisection gap exactly


@dataclass(frozen=True)
class Prediction:
    rate_wps: float
    throughput_wps: float
    """Highest workflow rate the allocation sustains (bottleneck model's capacity / calls)."""
    mean_s: float
    """Predicted mean workflow response at ``rate_wps`` (inf if overloaded)."""
    p95_s: float
    models: dict[str, ModelPoint | None]


def predict(curves: Curves, allocation: Allocation, rate: float) -> Prediction:
    """Predicted throughput and mean/p95 workflow response of ``allocation`` at ``rate``."""
    prof = curves.profile
    throughput = math.inf
    points: dict[str, ModelPoint | None] = {}
    lat = prof.base_s.copy()
    for j, m in enumerate(prof.models):
        counts = allocation.get(m, {})
        calls = prof.calls[m].calls_per_workflow
        cap = sum(curves.get(m, c).capacity * n for c, n in counts.items())
        throughput = min(throughput, cap / calls if calls > 0 else math.inf)
        pt = model_point(curves, m, counts, rate * calls)
        points[m] = pt
        if pt is None:
            lat[:] = math.inf
            continue
        lat += (
            prof.prefill_ref_s[:, j] * pt.prefill_ratio
            + prof.out_tokens[:, j] * pt.step_s
            + prof.n_calls[:, j] * pt.wait_s
        )
    if not np.isfinite(lat).all():
        return Prediction(rate, throughput, math.inf, math.inf, points)
    return Prediction(rate, throughput, float(lat.mean()), float(np.percentile(lat, 95)), points)


def model_cost(
    curves: Curves, model: str, counts: Mapping[ReplicaConfig, int], rate: float
) -> float:
    """The model's additive part of the predicted mean response at ``rate`` (inf if
    overloaded): the quantity the search trades GPUs for, model by model."""
    prof = curves.profile
    j = prof.models.index(model)
    pt = model_point(curves, model, counts, rate * prof.calls[model].calls_per_workflow)
    if pt is None:
        return math.inf
    return float(
        prof.prefill_ref_s[:, j].mean() * pt.prefill_ratio
        + prof.out_tokens[:, j].mean() * pt.step_s
        + prof.n_calls[:, j].mean() * pt.wait_s
    )
