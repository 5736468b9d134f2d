"""Shares: each LLM's share of a workflow's total LLM time, and how stable it is.

Scepsy's premise: a workflow's end-to-end latency varies a lot between executions, but
each LLM's share of the total LLM execution time does not.  ``measure_shares`` runs sample
executions in the simulator (eft, dynamic residency, a light arrival rate so queueing does not
dominate), sums per workflow the engine time (start of prefill to last token) of every
model's calls, and reports each model's mean share and its coefficient of variation across
workflows next to the CV of the end-to-end response time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from scalesched.errors import InputError
from scalesched.runs.setup import Scenario, prepare, run

DEFAULT_CLUSTER = "hetero-16"
DEFAULT_RATE = 0.2
"""Workflows/s: light on the default cluster, so shares reflect the work, not queueing."""


@dataclass(frozen=True)
class ModelShare:
    model: str
    share_mean: float
    """Mean over workflows of the model's share of the workflow's LLM time."""
    share_cv: float
    """Coefficient of variation of that share across workflows."""
    share_cv_present: float
    """The CV over only the workflows that call the model."""
    present_fraction: float
    """Fraction of workflows that call the model at all."""
    calls_per_workflow: float


@dataclass(frozen=True)
class SharesReport:
    workload: str
    workflows: int
    seed: int
    e2e_mean_s: float
    e2e_cv: float
    llm_time_cv: float
    """CV of a workflow's total LLM time."""
    models: tuple[ModelShare, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "workflows": self.workflows,
            "seed": self.seed,
            "e2e_mean_s": self.e2e_mean_s,
            "e2e_cv": self.e2e_cv,
            "llm_time_cv": self.llm_time_cv,
            "models": {
                m.model: {
                    "share_mean": m.share_mean,
                    "share_cv": m.share_cv,
                    "share_cv_present": m.share_cv_present,
                    "present_fraction": m.present_fraction,
                    "calls_per_workflow": m.calls_per_workflow,
                }
                for m in self.models
            },
        }


def _cv(x: np.ndarray) -> float:
    mean = float(x.mean()) if x.size else 0.0
    return float(x.std() / mean) if mean > 0 else 0.0


def measure_shares(
    workload: str,
    *,
    workflows: int = 200,
    seed: int = 0,
    cluster: str = DEFAULT_CLUSTER,
    rate: float = DEFAULT_RATE,
) -> SharesReport:
    """Simulate ``workflows`` executions of ``workload`` and measure the LLM time shares."""
    if workflows < 2:
        raise InputError("--workflows", "workflows", "need at least 2 to measure variation")
    setup = prepare(cluster, Scenario(workload=workload, workflows=workflows, rate=rate, seed=seed))
    jobs = setup.jobs
    res = run(setup, "eft", warmup=0, cooldown=0, record_trace=True)
    index = {j.workflow_id: i for i, j in enumerate(sorted(jobs, key=lambda j: j.arrival))}
    per: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(jobs)))
    calls: dict[str, int] = defaultdict(int)
    for rec in res.trace:
        if rec.kind == "llm" and rec.model:
            per[rec.model][index[rec.workflow]] += rec.end - rec.start
            calls[rec.model] += 1
    models = sorted(per)
    times = np.stack([per[m] for m in models]) if models else np.zeros((0, len(jobs)))
    total = times.sum(axis=0)
    ok = total > 0
    shares = times[:, ok] / total[ok]
    rows = []
    for k, m in enumerate(models):
        s = shares[k]
        present = s[s > 0]
        rows.append(
            ModelShare(
                model=m,
                share_mean=float(s.mean()),
                share_cv=_cv(s),
                share_cv_present=_cv(present),
                present_fraction=float(present.size / max(1, s.size)),
                calls_per_workflow=calls[m] / len(jobs),
            )
        )
    rt = res.response_times
    return SharesReport(
        workload=workload,
        workflows=len(jobs),
        seed=seed,
        e2e_mean_s=float(rt.mean()),
        e2e_cv=_cv(rt),
        llm_time_cv=_cv(total[ok]),
        models=tuple(rows),
    )
