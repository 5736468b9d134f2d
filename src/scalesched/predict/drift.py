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
(``adaptive``), over all tasks and over tasks placed on the drifted type, by decision time;
the p99 response of the workflows arriving in each phase is reported once: adaptation
changes the predictions, not the placements (the data policy does not read them).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from scalesched.decision.features import ClusterTables, make_decision
from scalesched.errors import InputError
from scalesched.predict.features import duration_baseline, duration_inputs
from scalesched.predict.metrics import scores
from scalesched.predict.model import QUANTILES, QuantilePredictor

MIN_WINDOW = 50
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

    def add(self, group: int, residual: np.ndarray) -> None:
        self._windows[group].append(residual)

    def offsets(self, group: int) -> np.ndarray:
        w = self._windows[group]
        if len(w) < MIN_WINDOW:
            return np.zeros(len(QUANTILES))
        r = np.array(w)
        return np.array([np.quantile(r[:, i], lv) for i, lv in enumerate(self._levels)])


def drift_study(
    predictor: QuantilePredictor,
    cluster: str,
    workload: str,
    drift_text: str,
    *,
    workflows: int,
    seed: int,
    load: float = 0.8,
    policy: str = "soft_eft",
    window: int = 1000,
) -> dict[str, Any]:
    """One run with the drift injected; coverage of the duration head before, during and
    after it, as trained and with sliding-window recalibration."""
    from scalesched.cluster import get_cluster
    from scalesched.eval.capacity import capacity_wps
    from scalesched.policies import get_policy
    from scalesched.sim.engine import Simulation
    from scalesched.sim.scenario import Scenario, build_jobs

    if window < MIN_WINDOW:
        raise InputError("--window", "window", f"must be at least {MIN_WINDOW}")
    if not 0.0 < load <= 2.0:
        raise InputError("--load", "load", f"must be in (0, 2], got {load!r}")
    spec = get_cluster(cluster)
    view_tables = ClusterTables(spec)  # what schedulers and the predictor read
    sim_tables = ClusterTables(spec)  # what the simulator runs on (drifted)
    drift = parse_drift(drift_text, view_tables)
    rate = load * capacity_wps(spec, workload)
    scenario = Scenario(workload=workload, workflows=workflows, rate=rate, seed=seed)
    jobs = build_jobs(view_tables, scenario)
    scheduler = get_policy(policy)
    sim = Simulation(
        spec, jobs, ready_order=scheduler.ready_order, record_trace=True, tables=sim_tables
    )
    scheduler.reset(seed)
    types = sorted({s.gpu_type or "cpu" for s in spec.servers})
    group_of = np.array([types.index(s.gpu_type or "cpu") for s in spec.servers])
    drifted_group = types.index(drift.gpu_type)
    recal = Recalibrator(len(types), window)
    offsets = np.cumsum([0] + [len(j.workflow.tasks) for j in jobs]).tolist()
    pending: dict[tuple[int, str], tuple[float, int, np.ndarray, np.ndarray]] = {}
    done: list[tuple[float, int, np.ndarray, np.ndarray, float]] = []
    seen = 0
    applied = False
    decision = sim.next_decision()
    while decision is not None:
        if not applied and sim.now >= drift.at:
            apply_drift(sim_tables, drift)
            sim.tables_changed()
            applied = True
        for rec in sim.trace[seen:]:  # tasks finished since the last decision
            t, g, q_static, q_adapt = pending.pop((rec.workflow, rec.task))
            y = max(rec.end - rec.start, 1e-6)
            recal.add(g, np.log(y) - np.log(q_static))
            done.append((t, g, q_static, q_adapt, y))
        seen = len(sim.trace)
        gid = sim._current  # the task being decided (the simulator has no public accessor)
        assert gid is not None
        pristine = make_decision(view_tables, sim, decision.task)
        answer = scheduler.select(pristine)
        if not isinstance(answer, int | np.integer):
            raise InputError("--policy", "policy", f"{policy!r} answers with actions")
        server = np.array([int(answer)])
        q = np.exp(
            predictor.duration(duration_inputs(pristine, server))[0]
            + duration_baseline(pristine, server)[0]
        )
        g = int(group_of[int(answer)])
        q_adapt = np.sort(q * np.exp(recal.offsets(g)))
        ji = bisect_right(offsets, gid) - 1
        task = jobs[ji].workflow.tasks[gid - offsets[ji]]
        pending[(jobs[ji].workflow_id, task.id)] = (sim.now, g, q, q_adapt)
        sim.apply(int(answer))
        decision = sim.next_decision()
    for rec in sim.trace[seen:]:
        t, g, q_static, q_adapt = pending.pop((rec.workflow, rec.task))
        done.append((t, g, q_static, q_adapt, max(rec.end - rec.start, 1e-6)))
    end = max(t for t, *_ in done)
    third = drift.at + (end - drift.at) / 3
    phases = {"before": (0.0, drift.at), "during": (drift.at, third), "after": (third, np.inf)}
    report: dict[str, Any] = {
        "cluster": spec.name,
        "workload": workload,
        "workflows": workflows,
        "seed": seed,
        "load": load,
        "policy": policy,
        "drift": {"gpu_type": drift.gpu_type, "factor": drift.factor, "at_s": drift.at},
        "window": window,
        "phases_s": {k: [float(lo), float(min(hi, end))] for k, (lo, hi) in phases.items()},
        "p99_response_s": {},
        "coverage": {},
    }
    arrivals = np.array([j.arrival for j in jobs])
    response = np.asarray(sim.response_times, dtype=float)
    for name, (lo, hi) in phases.items():
        sel = (arrivals >= lo) & (arrivals < hi) & np.isfinite(response)
        if sel.any():
            report["p99_response_s"][name] = float(np.percentile(response[sel], 99))
    for scope in ("all", "drifted"):
        for name, (lo, hi) in phases.items():
            rows = [
                r for r in done if lo <= r[0] < hi and (scope == "all" or r[1] == drifted_group)
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
            report["coverage"].setdefault(scope, {})[name] = entry
    return report
