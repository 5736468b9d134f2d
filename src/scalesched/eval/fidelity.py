"""Fidelity: what a run measured against what the simulator predicts for the same jobs,
cluster, policy and seed.

The ratios are measured / simulated. Where the gap comes from (docs/runtime.md): the
emulated LLM engine fixes a request's speed at admission (the simulator re-times the whole
batch at every event), Ray adds a dispatch and a result round trip to every task (a few
ms of wall time, i.e. ``ms / time_scale`` model seconds), arrivals are released by a
driver loop that may run late, and learned or random policies see slightly different
states, so they make different choices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.scheduler import Scheduler
from scalesched.workload.instance import Job

FIDELITY_KEYS = ("avg_response_time_s", "p95_response_time_s", "makespan_s", "mean_queue_delay_s")


def fidelity(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    scheduler: Scheduler,
    measured: dict[str, Any],
    measured_rt: np.ndarray,
    *,
    seed: int = 0,
    tables: ClusterTables | None = None,
) -> dict[str, float]:
    """``sim_<key>`` and ``<key>_ratio`` for the main metrics (no ratio where the
    simulator predicts 0), plus the median and p95 of the per-workflow response-time
    ratios (``measured_rt``: per workflow, arrival order)."""
    from scalesched.sim.run import simulate

    sim = simulate(cluster, jobs, scheduler, seed=seed, tables=tables)
    out: dict[str, float] = {}
    for key in FIDELITY_KEYS:
        predicted = float(sim.metrics[key])
        out[f"sim_{key}"] = predicted
        got = float(measured[key])
        if predicted > 0:  # no ratio to a zero prediction (it would print as NaN)
            out[f"{key.removesuffix('_s')}_ratio"] = got / predicted
    done = ~np.isnan(measured_rt)
    if done.all() and len(measured_rt) == len(sim.response_times):
        per = measured_rt / np.maximum(sim.response_times, 1e-9)
        out["workflow_rt_ratio_p50"] = float(np.median(per))
        out["workflow_rt_ratio_p95"] = float(np.percentile(per, 95))
    return out
