"""Static plans against periodic re-planning under time-varying load (docs/replanning.md).

    python research/replan_study.py \\
        --clusters hetero-8,hetero-16,configs/clusters/example-lab.yaml \\
        --shapes bursty,azure-conv,azure-code --seeds 7101,7102,7103 \\
        --period 600 --periods 2 --out results/replan/rows.jsonl
    python research/replan_study.py --table results/replan/rows.jsonl --csv docs/replanning.csv

Per cluster, the mean rate is ``--load`` times the planned world's capacity. Per arrival
shape and seed one arrival sequence is drawn (``bursty``: the on-off process; a shape: the
production hour's rate stretched over ``--period`` seconds, ``--periods`` times) and every
plan runs on the same jobs and arrivals (paired), with ``tail`` placing:

* ``static-mean``: the plan for the mean rate, all run long;
* ``static-peak``: the plan for the peak rate, the 95th percentile of the arrival rate over
  windows of ``--replan-period`` seconds (known in hindsight, as an operator sizing for
  the peak would estimate it);
* ``replan``: starts on the mean plan; every ``--replan-period`` seconds plans for the rate
  of the last window (``scalesched.runs.replan.Replanner``), loads and unloads charged.

Two regimes: ``fixed`` plans with the planner's default (it spends the cluster's GPUs while
any lowers the predicted mean: the fixed cluster's mean and p99), ``slo`` plans the
smallest deployment reaching a predicted mean of ``--slo-factor`` times the fixed plan's
prediction at the mean rate (the GPU-seconds an SLO costs). GPU-seconds are those the
deployment holds (engines resident, loading or draining, GPUs x time) over the measurement
window, from the first to the last measured arrival; ``gpus`` is that over the window's
length. Appends one JSON line per run to ``--out`` (runs already there are skipped).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from scalesched.cluster.tables import ClusterTables
from scalesched.plan.profile import workload_profile
from scalesched.plan.search import search_plan
from scalesched.policies import get_policy
from scalesched.runs.replan import Replanner, ReplanOptions, planner
from scalesched.runs.setup import Scenario, prepare
from scalesched.runs.windows import default_cooldown
from scalesched.runs.world import (
    PROFILE_SAMPLES,
    PROFILE_SEED,
    plan_deployment,
    planned_capacity_wps,
)
from scalesched.sim.engine import Simulation
from scalesched.sim.run import drive_simulation
from scalesched.stats import mean_ci, paired_ratio_ci
from scalesched.workload.arrivals import arrival_shapes, bursty_arrivals, shaped_arrivals

WORKLOAD = "agentic-mix"
POLICY = "tail"
PLANS = ("static-mean", "static-peak", "replan")
REGIMES = ("fixed", "slo")
PEAK_PERCENTILE = 95


def draw_arrivals(shape: str, rate: float, args: argparse.Namespace, seed: int) -> np.ndarray:
    """One arrival sequence: ``--periods`` periods of ``--period`` seconds at mean ``rate``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 4242]))
    per_period = max(1, round(rate * args.period))
    if shape == "bursty":
        return bursty_arrivals(rate, per_period * args.periods, rng)
    level = np.tile(arrival_shapes()[shape], args.periods)  # the shape, once a period
    return shaped_arrivals(rate, per_period * args.periods, rng, level)


def peak_rate(times: np.ndarray, window_s: float) -> float:
    """The ``PEAK_PERCENTILE`` percentile of the arrival rate over windows of ``window_s``."""
    counts = np.bincount((times // window_s).astype(int))
    return float(np.percentile(counts, PEAK_PERCENTILE)) / window_s


def slo_target(spec: Any, mean_rate: float, factor: float) -> float:
    """``factor`` times the predicted mean of the default plan at the mean rate."""
    profile = workload_profile(WORKLOAD, samples=PROFILE_SAMPLES, seed=PROFILE_SEED)
    return factor * float(search_plan(spec, profile, mean_rate).prediction.mean_s)


def run_one(spec: Any, jobs: Any, tables: ClusterTables, policy: Any, seed: int) -> dict[str, Any]:
    """One run over the shared jobs: response figures over the window, GPU-seconds held."""
    n = len(jobs)
    wall = time.perf_counter()
    sim = Simulation(spec, jobs, tables=tables, warmup=n // 20, cooldown=default_cooldown(n))
    result = drive_simulation(sim, policy, seed=seed)
    first, last = sim.window
    start, end = sim.arrival_time(first), sim.arrival_time(last)
    rt = result.response_times
    m = result.metrics
    return {
        "mean_s": float(rt.mean()),
        "p95_s": float(np.percentile(rt, 95)),
        "p99_s": float(np.percentile(rt, 99)),
        "window_s": end - start,
        "held_gpu_s": sim.held_gpu_seconds(start, end),
        "gpus": sim.held_gpu_seconds(start, end) / (end - start),
        "redeploys": int(m.get("redeploys", 0)),
        "loads": int(m.get("redeploy_loads", 0)),
        "unloads": int(m.get("redeploy_unloads", 0)),
        "resizes": int(m.get("redeploy_resizes", 0)),
        "workflows": n,
        "wall_s": time.perf_counter() - wall,
    }


def cell_runs(
    spec: Any, shape: str, seed: int, mean_rate: float, slo_s: float, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every regime and plan on one arrival sequence (the same jobs for all of them)."""
    times = draw_arrivals(shape, mean_rate, args, seed)
    peak = peak_rate(times, args.replan_period)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "arrivals.txt"
        path.write_text("\n".join(repr(float(t)) for t in times) + "\n")
        scenario = Scenario(
            workload=WORKLOAD,
            workflows=int(times.size),
            rate=mean_rate,
            arrivals=f"replay:{path}",
            seed=seed,
        )
        mean_plan = plan_deployment(spec, WORKLOAD, mean_rate)
        setup = prepare(spec, scenario, deployment=mean_plan, stream=False)
    rows = []
    for regime in REGIMES:
        slo = slo_s if regime == "slo" else None
        plan_for = planner(spec, WORKLOAD, slo_mean_s=slo)
        options = ReplanOptions(
            period_s=args.replan_period,
            window_s=args.replan_window,
            min_rate=0.05 * mean_rate,
        )
        for plan in PLANS:
            rate = peak if plan == "static-peak" else mean_rate
            deployment = plan_for(rate)
            policy = get_policy(POLICY)
            if plan == "replan":
                policy = Replanner(policy, plan_for, deployment, rate, options)
            tables = ClusterTables(spec, deployment)
            got = run_one(spec, setup.jobs, tables, policy, seed)
            row = {"cluster": spec.name, "shape": shape, "seed": seed, "regime": regime}
            row |= {"plan": plan, "mean_rate": mean_rate, "peak_rate": peak}
            row |= {"plan_rate": rate, "slo_s": slo_s, **got}
            rows.append(row)
            print(
                f"  {spec.name} {shape} seed {seed} {regime:5s} {plan:11s} "
                f"mean {got['mean_s']:6.2f} p99 {got['p99_s']:6.1f} GPUs {got['gpus']:5.2f} "
                f"redeploys {got['redeploys']:3d} ({got['wall_s']:.0f} s)",
                flush=True,
            )
    return rows


def measure(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["cluster"], r["shape"], r["seed"]))
    for cluster in args.clusters.split(","):
        spec = prepare(cluster, Scenario(workflows=10, rate=1.0)).cluster
        mean_rate = args.load * planned_capacity_wps(spec, WORKLOAD)
        slo_s = slo_target(spec, mean_rate, args.slo_factor)
        print(f"{spec.name}: mean rate {mean_rate:.3f} wf/s, SLO mean {slo_s:.1f} s", flush=True)
        for shape in args.shapes.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                if (spec.name, shape, seed) in done:
                    continue
                started = time.strftime("%H:%M:%S")
                print(f"[{started}] {spec.name} {shape} seed {seed}", flush=True)
                rows = cell_runs(spec, shape, seed, mean_rate, slo_s, args)
                with out.open("a") as fh:
                    for row in rows:
                        fh.write(json.dumps(row) + "\n")


def ci(values: list[float], digits: int = 1) -> str:
    m, h = mean_ci(values)
    return "-" if math.isnan(m) else f"{m:.{digits}f} ± {h:.{digits}f}"


def slo_verdict(means: list[float], slo_s: float) -> str:
    """Whether the measured mean meets the SLO: ``yes`` (the interval's top is under it),
    ``no`` (its bottom is over it), ``~`` (the interval holds it)."""
    m, h = mean_ci(means)
    if math.isnan(h):
        return "yes" if m <= slo_s else "no"
    return "yes" if m + h <= slo_s else "no" if m - h > slo_s else "~"


def plan_figures(
    by: dict[str, dict[int, dict[str, Any]]], plan: str
) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """One plan's figures over its seeds (mean and half-width), and its table cells."""
    runs = list(by[plan].values())
    figs = {k: mean_ci([float(r[k]) for r in runs]) for k in ("mean_s", "p95_s", "p99_s")}
    figs["gpus"] = mean_ci([float(r["gpus"]) for r in runs])
    peak = by["static-peak"]
    for key, name in (("mean_s", "mean_ratio"), ("held_gpu_s", "gpu_ratio")):
        figs[name] = paired_ratio_ci(
            {s: r[key] for s, r in by[plan].items()}, {s: r[key] for s, r in peak.items()}
        )
    cells = [ci([float(r[k]) for r in runs]) for k in ("mean_s", "p95_s", "p99_s")]
    cells.append(ci([float(r["gpus"]) for r in runs], 2))
    for name in ("mean_ratio", "gpu_ratio"):
        m, h = figs[name]
        cells.append("-" if plan == "static-peak" else f"{m:.3f} ± {h:.3f}")
    cells.append(f"{np.mean([r['redeploys'] for r in runs]):.0f}")
    cells.append(slo_verdict([float(r["mean_s"]) for r in runs], float(runs[0]["slo_s"])))
    return figs, cells


def table(rows_path: str, csv_path: str | None) -> None:
    """The markdown table (and CSV) of a rows file: per cluster, shape, regime and plan."""
    rows = [json.loads(line) for line in Path(rows_path).read_text().splitlines()]
    keys = sorted({(r["cluster"], r["shape"], r["regime"]) for r in rows})
    lines = [
        "| cluster | arrivals | regime | plan | seeds | mean (s) | p95 (s) | p99 (s) "
        "| GPUs held | mean / static-peak | GPU-s / static-peak | redeploys | mean ≤ SLO |",
        "|" + "---|" * 13,
    ]
    csv = [
        "cluster,arrivals,regime,plan,seeds,mean_s,mean_hw,p95_s,p95_hw,p99_s,p99_hw,"
        "gpus,gpus_hw,mean_ratio_peak,mean_ratio_hw,gpu_ratio_peak,gpu_ratio_hw,slo_s"
    ]
    for key in keys:
        cell = [r for r in rows if (r["cluster"], r["shape"], r["regime"]) == key]
        by = {p: {r["seed"]: r for r in cell if r["plan"] == p} for p in PLANS}
        for plan in PLANS:
            if not by[plan] or not by["static-peak"]:
                continue
            figs, cells = plan_figures(by, plan)
            head = [*key, plan, str(len(by[plan]))]
            lines.append("| " + " | ".join(head + cells) + " |")
            numbers = [f"{v:.4g}" for pair in figs.values() for v in pair]
            csv.append(",".join([*head, *numbers, f"{cell[0]['slo_s']:.4g}"]))
    print("\n".join(lines))
    slo = sorted({(r["cluster"], round(r["slo_s"], 1)) for r in rows})
    print("\nSLO (mean response) per cluster: " + ", ".join(f"{c} {s} s" for c, s in slo))
    if csv_path:
        Path(csv_path).write_text("\n".join(csv) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", default="hetero-8,hetero-16,configs/clusters/example-lab.yaml")
    ap.add_argument("--shapes", default="bursty,azure-conv,azure-code")
    ap.add_argument("--seeds", default="7101,7102,7103")
    ap.add_argument("--load", type=float, default=0.4)
    ap.add_argument("--period", type=float, default=900.0)
    ap.add_argument("--periods", type=int, default=2)
    ap.add_argument("--replan-period", type=float, default=30.0)
    ap.add_argument("--replan-window", type=float, default=60.0)
    ap.add_argument("--slo-factor", type=float, default=1.25)
    ap.add_argument("--out", default="results/replan/rows.jsonl")
    ap.add_argument("--table", metavar="ROWS", help="print the table of a rows file")
    ap.add_argument("--csv", help="with --table: also write the table as CSV here")
    args = ap.parse_args()
    if args.table:
        table(args.table, args.csv)
    else:
        measure(args)


if __name__ == "__main__":
    main()
