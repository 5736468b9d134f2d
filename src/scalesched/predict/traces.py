"""Training and evaluation samples from simulator traces.

One run of a data policy (``soft_eft`` by default: eft's choices with some spread, so the
traces hold more than eft's single favourite server) records, at every decision, the
predictor inputs for the server it chose; after the run each decision is joined to what
happened: the task's true output tokens and its execution time (start to end) on that
server. Runs are at a steady arrival rate, ``load`` x the cluster's measured capacity.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.decision.features import ClusterTables
from scalesched.errors import InputError
from scalesched.predict.features import (
    TASK_INPUTS,
    duration_baseline,
    duration_inputs,
    finish_baseline,
    static_group,
    token_baseline,
    token_inputs,
)


@dataclass(frozen=True)
class Samples:
    """Inputs, baselines (ln of the static estimate), truths and static groups per head."""

    tok_x: np.ndarray
    tok_base: np.ndarray
    tok_y: np.ndarray
    tok_group: np.ndarray
    dur_x: np.ndarray
    dur_base: np.ndarray
    dur_y: np.ndarray
    dur_group: np.ndarray
    fin_base: np.ndarray
    fin_y: np.ndarray
    """Seconds from the decision to the task's end (the finish head reads ``dur_x``)."""

    @staticmethod
    def concat(parts: list[Samples]) -> Samples:
        return Samples(
            **{
                f: np.concatenate([getattr(p, f) for p in parts])
                for f in Samples.__dataclass_fields__
            }
        )


def collect(
    spec: ClusterSpec,
    workload: str,
    *,
    workflows: int,
    seed: int,
    load: float = 0.8,
    policy: str = "soft_eft",
) -> Samples:
    """Simulate ``workflows`` workflows of ``workload`` on ``spec`` at ``load`` with the
    data ``policy`` (seeded by ``seed``) and return one sample per executed task."""
    from scalesched.eval.capacity import capacity_wps
    from scalesched.policies import get_policy
    from scalesched.sim.engine import Simulation
    from scalesched.sim.scenario import Scenario, build_jobs

    if not (isinstance(load, float | int) and 0.0 < load <= 2.0):
        raise InputError("--load", "load", f"must be in (0, 2], got {load!r}")
    tables = ClusterTables(spec)
    rate = load * capacity_wps(spec, workload)
    jobs = build_jobs(
        tables, Scenario(workload=workload, workflows=workflows, rate=rate, seed=seed)
    )
    scheduler = get_policy(policy)
    sim = Simulation(
        spec, jobs, ready_order=scheduler.ready_order, record_trace=True, tables=tables
    )
    scheduler.reset(seed)
    offsets = np.cumsum([0] + [len(j.workflow.tasks) for j in jobs]).tolist()
    keys: list[tuple[int, str]] = []
    tok_x, tok_base, tok_truth, tok_group = [], [], [], []
    dur_x, dur_base, dur_group, fin_base, decided_at = [], [], [], [], []
    decision = sim.next_decision()
    while decision is not None:
        gid = sim._current  # the task being decided (the simulator has no public accessor)
        assert gid is not None
        answer = scheduler.select(decision)
        if not isinstance(answer, int | np.integer):
            raise InputError(
                "--policy", "policy", f"{policy!r} answers with actions; need plain placements"
            )
        server = np.array([int(answer)])
        ji = bisect_right(offsets, gid) - 1
        task = jobs[ji].workflow.tasks[gid - offsets[ji]]
        keys.append((jobs[ji].workflow_id, task.id))
        req = decision.task
        dur_x.append(duration_inputs(decision, server)[0])
        dur_base.append(float(duration_baseline(decision, server)[0]))
        dur_group.append(static_group(req))
        fin_base.append(float(finish_baseline(decision, server)[0]))
        decided_at.append(decision.now)
        if req.kind == "llm":
            tok_x.append(token_inputs(req)[0])
            tok_base.append(token_baseline(req))
            tok_truth.append(float(max(task.output_tokens, 1)))
            tok_group.append(static_group(req))
        sim.apply(int(answer))
        decision = sim.next_decision()
    ends = {(r.workflow, r.task): (r.start, r.end) for r in sim.trace}
    dur_y = np.array([max(ends[k][1] - ends[k][0], 1e-6) for k in keys])
    fin_y = np.array([max(ends[k][1] - t, 1e-6) for k, t in zip(keys, decided_at, strict=True)])
    return Samples(
        tok_x=np.array(tok_x).reshape(len(tok_x), TASK_INPUTS),
        tok_base=np.array(tok_base),
        tok_y=np.array(tok_truth),
        tok_group=np.array(tok_group, dtype=np.int64),
        dur_x=np.array(dur_x),
        dur_base=np.array(dur_base),
        dur_y=dur_y,
        dur_group=np.array(dur_group, dtype=np.int64),
        fin_base=np.array(fin_base),
        fin_y=fin_y,
    )
