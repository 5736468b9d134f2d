"""Drift and online adaptation: a server type slows down mid-run; does the predictor notice?

``--drift GPU_TYPE:FACTOR@TIME``: from simulated second ``TIME`` on, every engine on servers
with that GPU type decodes ``FACTOR`` times slower (prefill and tools are unchanged).
Schedulers and the predictor are not told: they read a pristine copy of the cluster's
tables, so the cost model's estimates, and the predictor's inputs, are the pre-drift ones.
The simulator reads the scaled decode tables from the next change of each engine's batch
on (it recomputes a step's time there; at load that is within a fraction of a second).
No engine code changes: the drift lives in the tables the simulator is given.

**Online adaptation** (sliding-window recalibration): the network stays as trained; for each
GPU type (and for the CPU servers) a window of the last ``window`` completed tasks' residuals
``ln(truth) - predicted quantile`` at every level gives a per-level offset, the residual's
own quantile at that level (conformalised quantile regression, one-sided per level, made
causal: a task enters the window when it finishes, and a prediction uses only tasks finished
before its decision). With fewer than 50 tasks in a type's window the offsets are 0.

Coverage is reported before the drift, during (the first third of the time after it) and
after (the rest), for the predictor as trained (``static``) and with adaptation
(``adaptive``), over all tasks and over tasks placed on the drifted type, by decision time,
with the p99 and mean response of the workflows arriving in each phase.

**Routing on the recalibrated durations.** A data policy such as ``soft_eft`` does not read
the predictor, so adaptation changes the predictions, not the placements. ``tail`` and
``pred_mean`` (:mod:`scalesched.policies.tail`) route on the cost model, which is as blind
to the drift as the trained predictor; for them the study runs a second arm,
``routing_adapted``, in which before each decision the router's ``exec_scale`` is set, per
server, to the recalibrated median over the trained median of the duration head on that
server's GPU type (``exp`` of the median-level offset of a window fed by LLM calls only:
tools do not slow down), so it sees the slowed type as slower.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision, make_decision
from scalesched.decision.scheduler import BaseScheduler
from scalesched.errors import InputError
from scalesched.predict.features import duration_baseline, duration_inputs
from scalesched.predict.metrics import scores
from scalesched.predict.model import QUANTILES, QuantilePredictor
from scalesched.runs.traces import TraceRun, decided_task, placement

MIN_WINDOW = 50
_I50 = QUANTILES.index(0.5)
_DRIFT = re.compile(r"^(?P<gpu>[^:@]+):(?P<factor>[0-9.eE+-]+)@(?P<at>[0-9.eE+-]+)$")


@dataclass(frozen=True)
class Drift:
    gpu_type: str
    factor: float
    at: float


def parse_drift(text: str, tables: ClusterTables) -> Drift:
    """``GPU_TYPE:FACTOR@TIME`` for a GPU type of the cluster, FACTOR > 0, TIME >= 0."""
    m = _DRIFT.match(text.strip())
    if m is None:
        raise InputError("--drift", "drift", f"expected GPU_TYPE:FACTOR@TIME, got {text!r}")
    types = sorted({s.gpu_type for s in tables.spec.servers if s.gpu_type})
    if m["gpu"] not in types:
        raise InputError("--drift", "drift", f"unknown GPU type {m['gpu']!r}; cluster has {types}")
    try:
        factor, at = float(m["factor"]), float(m["at"])
    except ValueError:
        raise InputError("--drift", "drift", f"FACTOR and TIME must be numbers: {text!r}") from None
    if not (np.isfinite(factor) and 0 < factor <= 100 and np.isfinite(at) and at >= 0):
        raise InputError("--drift", "drift", "need 0 < FACTOR <= 100 and TIME >= 0 (seconds)")
    return Drift(m["gpu"], factor, at)


def apply_drift(tables: ClusterTables, drift: Drift) -> int:
    """Scale the decode tables of every engine class on ``drift.gpu_type``; returns how many."""
    classes = [
        k for k, e in enumerate(tables.engines) if getattr(e, "gpu_type", None) == drift.gpu_type
    ]
    for k in classes:
        tables.decode_lin[k] *= drift.factor
        tables.decode_attn[k] *= drift.factor
        tables.decode_step_increase[k] *= drift.factor
    return len(classes)


class Recalibrator:
    """Per-group sliding windows of quantile residuals and the offsets they give."""

    def __init__(self, groups: int, window: int) -> None:
        self._windows: list[deque[np.ndarray]] = [deque(maxlen=window) for _ in range(groups)]
        self._levels = np.array(QUANTILES)
        self._offsets: dict[int, np.ndarray] = {}  # per group, until its window changes

    def add(self, group: int, residual: np.ndarray) -> None:
        self._windows[group].append(residual)
        self._offsets.pop(group, None)

    def offsets(self, group: int) -> np.ndarray:
        cached = self._offsets.get(group)
        if cached is not None:
            return cached
        w = self._windows[group]
        if len(w) < MIN_WINDOW:
            out = np.zeros(len(QUANTILES))
        else:
            r = np.array(w)
            out = np.array([np.quantile(r[:, i], lv) for i, lv in enumerate(self._levels)])
        self._offsets[group] = out
        return out


@dataclass
class _Arm:
    """What one run of the study leaves: per finished task (decision time, group, forecast
    as trained, recalibrated forecast, truth), and the workflows' arrivals and responses."""

    done: list[tuple[float, int, np.ndarray, np.ndarray, float]]
    arrivals: np.ndarray
    response: np.ndarray


def gpu_groups(spec: ClusterSpec) -> tuple[list[str], np.ndarray]:
    """The recalibration's groups: GPU types (and ``cpu``), sorted, and each server's."""
    types = sorted({s.gpu_type or "cpu" for s in spec.servers})
    return types, np.array([types.index(s.gpu_type or "cpu") for s in spec.servers])


def routes_on_durations(scheduler: object) -> bool:
    """Whether a policy can route on recalibrated durations (``tail``, ``pred_mean``)."""
    from scalesched.policies.tail import TailScheduler

    return isinstance(scheduler, TailScheduler) and scheduler.via == "tokens"


class _DriftArm(BaseScheduler):
    """The policy under test, seeing pristine decisions while the simulator runs on drifted
    tables; it injects the drift when its time comes and scores each placement's forecast
    as tasks finish. With ``adapt`` it routes on the recalibrated durations."""

    def __init__(
        self,
        predictor: QuantilePredictor,
        run: TraceRun,
        drift: Drift,
        window: int,
        *,
        adapt: bool,
    ) -> None:
        self.predictor, self.run, self.drift, self.adapt = predictor, run, drift, adapt
        self.sim_tables = ClusterTables(run.spec)  # what the simulator runs on (drifted)
        self.view_tables, self.jobs, self.inner, self.sim = run.start(self.sim_tables)
        self.name, self.ready_order = self.inner.name, self.inner.ready_order
        self.types, self.group_of = gpu_groups(run.spec)
        self.recal = Recalibrator(len(self.types), window)
        self.route_recal = Recalibrator(len(self.types), window)
        self.pending: dict[tuple[int, str], tuple[float, int, np.ndarray, np.ndarray, bool]] = {}
        self.done: list[tuple[float, int, np.ndarray, np.ndarray, float]] = []
        self.seen = 0
        self.applied = False

    def select(self, decision: Decision) -> int:
        sim = self.sim
        if not self.applied and sim.now >= self.drift.at:
            apply_drift(self.sim_tables, self.drift)
            sim.tables_changed()
            self.applied = True
        self.score_finished(adapt_residuals=True)
        key, _ = decided_task(sim)
        pristine = make_decision(self.view_tables, sim, decision.task)
        if self.adapt:
            from scalesched.policies.tail import TailScheduler

            assert isinstance(self.inner, TailScheduler)
            median = np.array([self.route_recal.offsets(g)[_I50] for g in range(len(self.types))])
            self.inner.exec_scale = np.exp(median)[self.group_of]
        answer = placement(self.inner.select(pristine), self.run.policy)
        server = np.array([answer])
        q = np.exp(
            self.predictor.duration(duration_inputs(pristine, server))[0]
            + duration_baseline(pristine, server)[0]
        )
        g = int(self.group_of[answer])
        q_adapt = np.sort(q * np.exp(self.recal.offsets(g)))
        self.pending[key] = (sim.now, g, q, q_adapt, decision.task.kind == "llm")
        return answer

    def score_finished(self, *, adapt_residuals: bool) -> None:
        """Join the tasks finished since the last call to their forecasts."""
        trace = self.sim.trace
        for rec in trace[self.seen :]:
            t, g, q_static, q_adapt, llm = self.pending.pop((rec.workflow, rec.task))
            y = max(rec.end - rec.start, 1e-6)
            if adapt_residuals:
                residual = np.log(y) - np.log(q_static)
                self.recal.add(g, residual)
                if llm:
                    self.route_recal.add(g, residual)
            self.done.append((t, g, q_static, q_adapt, y))
        self.seen = len(trace)


def _run_arm(
    predictor: QuantilePredictor, run: TraceRun, drift: Drift, window: int, *, adapt: bool
) -> _Arm:
    """One run with the drift injected (``_DriftArm``), driven by the one decision cycle."""
    arm = _DriftArm(predictor, run, drift, window, adapt=adapt)
    drive(arm.sim, arm)
    arm.score_finished(adapt_residuals=False)
    arrivals = np.array([j.arrival for j in arm.jobs])
    return _Arm(arm.done, arrivals, np.asarray(arm.sim.response_times, dtype=float))


def _summary(
    arm: _Arm, phases: dict[str, tuple[float, float]], drifted_group: int
) -> dict[str, Any]:
    """Per phase: p99 and mean response of the workflows arriving in it, and coverage of the
    tasks decided in it (all, and those placed on the drifted type)."""
    out: dict[str, Any] = {"p99_response_s": {}, "mean_response_s": {}, "coverage": {}}
    for name, (lo, hi) in phases.items():
        sel = (arm.arrivals >= lo) & (arm.arrivals < hi) & np.isfinite(arm.response)
        if sel.any():
            out["p99_response_s"][name] = float(np.percentile(arm.response[sel], 99))
            out["mean_response_s"][name] = float(arm.response[sel].mean())
    for scope in ("all", "drifted"):
        for name, (lo, hi) in phases.items():
            rows = [
                r for r in arm.done if lo <= r[0] < hi and (scope == "all" or r[1] == drifted_group)
            ]
            if not rows:
                continue
            truth = np.array([r[4] for r in rows])
            entry: dict[str, Any] = {"n": len(rows)}
            forecasts = {
                "static": np.array([r[2] for r in rows]),
                "adaptive": np.array([r[3] for r in rows]),
            }
            for label, q in forecasts.items():
                sc = scores(truth, q)
                entry[label] = {k: sc[k] for k in ("coverage_80", "coverage_90", "pinball_loss")}
            out["coverage"].setdefault(scope, {})[name] = entry
    return out


def drift_study(
    predictor: QuantilePredictor, run: TraceRun, drift_text: str, *, window: int = 1000
) -> dict[str, Any]:
    """``run`` with the drift injected; coverage of the duration head before, during and
    after it, as trained and with sliding-window recalibration, and the p99 response per
    phase. A policy that routes on durations (``tail``, ``pred_mean``) runs twice: as
    trained, and routing on the recalibrated durations (``routing_adapted``)."""
    from scalesched.policies import get_policy

    if window < MIN_WINDOW:
        raise InputError("--window", "window", f"must be at least {MIN_WINDOW}")
    drift = parse_drift(drift_text, ClusterTables(run.spec))
    arms = {"as_trained": _run_arm(predictor, run, drift, window, adapt=False)}
    if routes_on_durations(get_policy(run.policy)):
        arms["routing_adapted"] = _run_arm(predictor, run, drift, window, adapt=True)
    end = max(t for t, *_ in arms["as_trained"].done)
    third = drift.at + (end - drift.at) / 3
    phases = {"before": (0.0, drift.at), "during": (drift.at, third), "after": (third, np.inf)}
    drifted_group = gpu_groups(run.spec)[0].index(drift.gpu_type)
    report: dict[str, Any] = {
        **run.describe(),
        "drift": {"gpu_type": drift.gpu_type, "factor": drift.factor, "at_s": drift.at},
        "window": window,
        "phases_s": {k: [float(lo), float(min(hi, end))] for k, (lo, hi) in phases.items()},
        **_summary(arms["as_trained"], phases, drifted_group),
    }
    if "routing_adapted" in arms:
        report["routing_adapted"] = _summary(arms["routing_adapted"], phases, drifted_group)
    return report
