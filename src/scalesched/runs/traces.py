"""Training and evaluation samples from simulator traces.

One run of a data policy (``soft_eft`` by default: eft's choices with some spread, so the
traces hold more than eft's single favourite server) records, at every decision, the
predictor inputs for the server it chose; after the run each decision is joined to what
happened: the task's true output tokens and its execution time (start to end) on that
server. Runs are at a steady arrival rate, ``load`` x the cluster's measured capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.decision.features import Decision
from scalesched.decision.scheduler import BaseScheduler, Scheduler, SchedulingError
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
from scalesched.predict.model import QuantilePredictor
from scalesched.predict.samples import Samples

if TYPE_CHECKING:
    from scalesched.sim.engine import Simulation
    from scalesched.workload.instance import Job, TaskInstance


@dataclass(frozen=True)
class TraceRun:
    """One recorded run: ``workflows`` workflows of ``workload`` on ``spec`` arriving at
    ``load`` x the cluster's measured capacity, placed by the data ``policy`` (seeded by
    ``seed``). ``predict fit``, ``eval`` and ``drift`` all describe their runs with it."""

    spec: ClusterSpec
    workload: str
    workflows: int
    seed: int
    load: float = 0.8
    policy: str = "soft_eft"

    def start(
        self, sim_tables: ClusterTables | None = None
    ) -> tuple[ClusterTables, list[Job], Scheduler, Simulation]:
        """The tables schedulers read, the jobs, the reset policy and a trace-recording
        simulation on ``sim_tables`` (default: the same tables; ``predict drift`` hands it
        a copy it changes mid-run)."""
        from scalesched.policies import get_policy
        from scalesched.runs.capacity import capacity_wps
        from scalesched.sim.engine import Simulation
        from scalesched.sim.scenario import Scenario, build_jobs

        if not (isinstance(self.load, float | int) and 0.0 < self.load <= 2.0):
            raise InputError("--load", "load", f"must be in (0, 2], got {self.load!r}")
        tables = ClusterTables(self.spec)
        rate = self.load * capacity_wps(self.spec, self.workload)
        scenario = Scenario(
            workload=self.workload, workflows=self.workflows, rate=rate, seed=self.seed
        )
        jobs = build_jobs(tables, scenario)
        scheduler = get_policy(self.policy)
        sim = Simulation(
            self.spec,
            jobs,
            ready_order=scheduler.ready_order,
            record_trace=True,
            tables=sim_tables or tables,
        )
        scheduler.reset(self.seed)
        return tables, jobs, scheduler, sim

    def describe(self) -> dict[str, Any]:
        """The run's settings as the JSON reports name them."""
        return {
            "cluster": self.spec.name,
            "workload": self.workload,
            "workflows": self.workflows,
            "seed": self.seed,
            "load": self.load,
            "policy": self.policy,
        }


def decided_task(sim: Simulation) -> tuple[tuple[int, str], TaskInstance]:
    """The task the simulation's pending decision is about, keyed as its trace records are
    (workflow id, task id), with its hidden truths: for joining decisions to outcomes."""
    gid = sim.current_task
    if gid is None:
        raise SchedulingError("no pending decision")
    job = sim.jobs[sim.tasks.job_of[gid]]
    task = sim.tasks.task(gid)
    return (job.workflow_id, task.id), task


def placement(answer: object, policy: str) -> int:
    """A data policy's answer as a server index; hedges and deferrals are not placements."""
    if not isinstance(answer, int | np.integer):
        raise InputError(
            "--policy", "policy", f"{policy!r} answers with actions; need plain placements"
        )
    return int(answer)


class _Recorder(BaseScheduler):
    """The data policy, noting each decision's inputs before its answer is applied."""

    def __init__(self, inner: Scheduler, sim: Simulation, policy: str) -> None:
        self.inner, self.sim, self.policy = inner, sim, policy
        self.name, self.ready_order = inner.name, inner.ready_order
        self.keys: list[tuple[int, str]] = []
        self.tok_x: list[np.ndarray] = []
        self.tok_base: list[float] = []
        self.tok_truth: list[float] = []
        self.tok_group: list[int] = []
        self.dur_x: list[np.ndarray] = []
        self.dur_base: list[float] = []
        self.dur_group: list[int] = []
        self.fin_base: list[float] = []
        self.decided_at: list[float] = []

    def select(self, decision: Decision) -> int:
        key, task = decided_task(self.sim)
        answer = placement(self.inner.select(decision), self.policy)
        server = np.array([answer])
        self.keys.append(key)
        req = decision.task
        self.dur_x.append(duration_inputs(decision, server)[0])
        self.dur_base.append(float(duration_baseline(decision, server)[0]))
        self.dur_group.append(static_group(req))
        self.fin_base.append(float(finish_baseline(decision, server)[0]))
        self.decided_at.append(decision.now)
        if req.kind == "llm":
            self.tok_x.append(token_inputs(req)[0])
            self.tok_base.append(token_baseline(req))
            self.tok_truth.append(float(max(task.output_tokens, 1)))
            self.tok_group.append(static_group(req))
        return answer


def collect(run: TraceRun) -> Samples:
    """Simulate ``run`` and return one sample per executed task."""
    _, _, scheduler, sim = run.start()
    rec = _Recorder(scheduler, sim, run.policy)
    drive(sim, rec)
    keys, decided_at = rec.keys, rec.decided_at
    tok_x, tok_base, tok_truth, tok_group = rec.tok_x, rec.tok_base, rec.tok_truth, rec.tok_group
    dur_x, dur_base, dur_group, fin_base = rec.dur_x, rec.dur_base, rec.dur_group, rec.fin_base
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


def fit_on_traces(
    cluster: str,
    workload: str,
    *,
    workflows: int,
    seeds: list[int],
    load: float | list[float] = 0.8,
    policy: str = "soft_eft",
) -> QuantilePredictor:
    """Record traces (one run per seed and load) and fit on them; the first seed seeds the
    fit. Provenance goes into the predictor's ``meta``."""
    from scalesched.cluster import get_cluster
    from scalesched.predict.train import fit

    if not seeds:
        raise InputError("--seed", "seed", "give at least one seed")
    spec = get_cluster(cluster)
    loads = load if isinstance(load, list) else [load]
    parts = [
        collect(TraceRun(spec, workload, workflows, s, lv, policy)) for s in seeds for lv in loads
    ]
    meta = {
        "cluster": spec.name,
        "workload": workload,
        "workflows": workflows,
        "trace_seeds": seeds,
        "loads": loads,
        "policy": policy,
    }
    return fit(Samples.concat(parts), seed=seeds[0], meta=meta)


def evaluate_on_traces(predictor: QuantilePredictor, run: TraceRun) -> dict[str, Any]:
    """Record fresh traces and score the predictor on them (``predict eval --json``)."""
    from scalesched.predict.metrics import evaluate

    return {
        **run.describe(),
        "seed_seen_in_training": run.seed in predictor.meta.get("trace_seeds", []),
        "heads": evaluate(predictor, collect(run)),
    }
