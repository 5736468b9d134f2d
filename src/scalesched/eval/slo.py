"""Max load at SLO: the highest load at which a policy still meets a tail-latency target.

The SLO is a multiple of the contention-free lower bound: a run meets it when the p99 of the
per-workflow slowdown (response time / that workflow's lower bound) stays at or below
``slo`` and the run is at steady state (an overloaded run never meets it, however its
measured tail looks). This is the figure a platform engineer buys hardware by: how much
traffic a cluster takes before users feel it.

The search bisects the load (a fraction of measured capacity) per policy, size and seed on
the study's long runs, assuming the slowdown grows with load (it does on every run we
inspected; a non-monotone policy would be reported at a load it passed, never one it
failed).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scalesched.eval.study import (
    STATUS_OK,
    STATUS_UNSUPPORTED,
    RunSpec,
    StudyConfig,
    resolve_capacities,
    run_parallel,
)
from scalesched.stats import mean_ci

LOAD_RANGE = (0.1, 1.6)
SLO_STEPS = 6
"""Bisection steps over LOAD_RANGE: resolution 1.5 / 2^6, about 0.02 load."""


@dataclass(frozen=True)
class SloSpec:
    policy: str
    n: int
    seed: int
    workload: str
    workflows: int
    cluster: str
    slo: float


def meets_slo(metrics: dict[str, Any], slo: float) -> bool:
    return bool(metrics["steady_state"]) and float(metrics["p99_slowdown"]) <= slo


def max_load_one(spec: SloSpec) -> dict[str, Any]:
    """The highest load (resolution ~0.02) at which one policy meets the SLO on one seed."""
    from scalesched.eval.study import run_one

    row: dict[str, Any] = {"policy": spec.policy, "n_servers": spec.n, "seed": spec.seed}
    lo, hi = LOAD_RANGE
    best = 0.0
    for _ in range(SLO_STEPS):
        mid = 0.5 * (lo + hi)
        run = run_one(
            RunSpec(
                spec.policy,
                spec.n,
                spec.seed,
                spec.workload,
                mid,
                spec.workflows,
                spec.cluster,
            )
        )
        if run["status"] != STATUS_OK:
            return {**row, "status": STATUS_UNSUPPORTED, "max_load_at_slo": math.nan}
        if meets_slo(run, spec.slo):
            best, lo = mid, mid
        else:
            hi = mid
    return {**row, "status": STATUS_OK, "max_load_at_slo": best}


def run_slo_study(
    cfg: StudyConfig,
    slo: float,
    *,
    jobs: int | None = None,
    on_done: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Max load at SLO for every policy x N x seed of the study (process pool), at the
    study's run length (resolved: ``auto`` has run by now)."""
    if cfg.workflows is None:
        raise ValueError("the SLO search needs the study's resolved run length")
    specs = [
        SloSpec(p, n, s, cfg.workload, cfg.workflows, cfg.cluster_for(n), slo)
        for n in cfg.nodes
        for s in cfg.seeds
        for p in cfg.policies
    ]
    resolve_capacities(cfg)  # once here, not in every worker
    rows = run_parallel(max_load_one, specs, jobs or os.cpu_count() or 1, on_done)
    order = {p: i for i, p in enumerate(cfg.policies)}
    rows.sort(key=lambda r: (r["n_servers"], r["seed"], order[r["policy"]]))
    return rows


def summarise_slo(rows: Sequence[dict[str, Any]], slo: float) -> dict[str, Any]:
    """Per N and policy: mean max load at SLO with its 95% CI over seeds."""
    out: dict[str, Any] = {"slo_p99_slowdown": slo, "by_n": {}}
    for n in sorted({int(r["n_servers"]) for r in rows}):
        entry: dict[str, Any] = {}
        for p in dict.fromkeys(r["policy"] for r in rows):
            vals = [
                float(r["max_load_at_slo"])
                for r in rows
                if r["policy"] == p and r["n_servers"] == n and r["status"] == STATUS_OK
            ]
            if vals:
                m, ci = mean_ci(vals)
                entry[p] = {"max_load_at_slo": m, "ci": ci, "seeds": len(vals)}
        out["by_n"][n] = entry
    return out


def slo_markdown(summary: dict[str, Any]) -> str:
    slo = summary["slo_p99_slowdown"]
    lines = [
        f"\n## Max load at SLO (p99 slowdown <= {slo:g}x the lower bound, steady state)\n",
        "| N | policy | max load (fraction of measured capacity) |",
        "|---|---|---|",
    ]
    for n, entry in summary["by_n"].items():
        for p, e in entry.items():
            ci = "" if math.isnan(e["ci"]) else f" ± {e['ci']:.2f}"
            lines.append(f"| {n} | {p} | {e['max_load_at_slo']:.2f}{ci} |")
    return "\n".join(lines) + "\n"
