#!/usr/bin/env python3
"""The planning study of docs/planning.md: every number there comes from this script.

Parts (each prints markdown and writes JSON under --out):

* ``shares``: each LLM's share of the LLM time and its CV, six patterns and the mix;
* ``validate``: predicted vs simulated mean/p95 for the plan and both baselines over rates;
* ``sweep``: mean/p95 response against rate and the max rate at SLO for the plan
  (re-planned per rate), both baselines, and dynamic residency with heuristics and SCALE;
* ``timing``: planning time against cluster size, up to ~1024 GPUs.

Steady state: every run is at least ``--workflows`` long (default 1000) and long enough
for its arrivals to span ``--horizon`` seconds (default 150, ~7x the mean response), and
the first ``--warmup`` fraction (default 0.2) of the workflows, by arrival, is dropped
from the metrics.  Several seeds (``--seeds``); a rate meets the SLO when the p95 response averaged
over the seeds is at most the SLO.  SLO: ``--slo-mult`` (default 1.5) x the p95 of the
workflows' contention-free lower bounds on the plain cluster, unless ``--slo-p95`` is given.

Usage: nice taskset -c 1 python benchmarks/study_plan.py all --out results/plan-study
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict
from scalesched.cluster.model import ClusterSpec
from scalesched.cluster.tables import ClusterTables
from scalesched.eval.shares import measure_shares
from scalesched.plan.pipeline import Curves, predict
from scalesched.plan.profile import workload_profile
from scalesched.plan.search import search_plan
from scalesched.policies import get_policy
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs

PATTERNS = ("react", "plan-execute", "map-reduce", "debate", "codegen", "deep-research")
STATIC = ("plan", "independent", "uniform")


def _out(args: argparse.Namespace, name: str, data: Any) -> None:
    path = Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{name}.json").write_text(json.dumps(data, indent=1, default=str) + "\n")


class Runner:
    """Simulations of one (cluster, workload) at steady state, with plans cached per rate."""

    def __init__(self, args: argparse.Namespace, cluster: str, workload: str) -> None:
        self.args = args
        self.spec: ClusterSpec = get_cluster(cluster)
        self.plain = ClusterTables(self.spec)
        self.workload = workload
        self.profile = workload_profile(workload)
        self.curves = Curves(self.profile)
        self._static: dict[tuple[str, float], Any] = {}

    def plan(self, strategy: str, rate: float) -> Any:
        key = (strategy, rate)
        if key not in self._static:
            self._static[key] = search_plan(
                self.spec, self.profile, max(rate, 1e-3), strategy=strategy, curves=self.curves
            )
        return self._static[key]

    def workflows(self, rate: float) -> int:
        """At least --workflows, and enough for arrivals to span --horizon seconds."""
        return max(self.args.workflows, math.ceil(rate * self.args.horizon))

    def jobs(self, rate: float, seed: int) -> list[Any]:
        n = self.workflows(rate)
        return build_jobs(
            self.plain, Scenario(workload=self.workload, workflows=n, rate=rate, seed=seed)
        )

    def slo(self) -> float:
        if self.args.slo_p95 is not None:
            return float(self.args.slo_p95)
        jobs = self.jobs(0.1, 0)
        from scalesched.kernel.records import lower_bound

        lbs = [lower_bound(self.plain, j) for j in jobs]
        return float(self.args.slo_mult * np.percentile(lbs, 95))

    def run(self, system: str, rate: float, seed: int) -> dict[str, float]:
        """One steady-state run: mean/p95 over the workflows after the warm-up."""
        if system in STATIC:
            result = self.plan(system, rate)
            dep = deployment_from_dict(
                deployment_to_dict(system, self.spec.name, result.replicas), self.spec, system
            )
            tables, policy = ClusterTables(self.spec, dep), self.args.router
        else:
            tables, policy = self.plain, system
        res = simulate(
            self.spec, self.jobs(rate, seed), get_policy(policy), seed=seed, tables=tables
        )
        rt = res.response_times
        n = self.workflows(rate)
        rt = rt[int(self.args.warmup * n) :] if rt.size == n else rt
        return {
            "mean_s": float(rt.mean()),
            "p95_s": float(np.percentile(rt, 95)),
            "throughput_wps": float(res.metrics["throughput_wps"]),
            "completed": int(res.metrics["workflows_completed"]),
        }

    def point(self, system: str, rate: float) -> dict[str, Any]:
        runs = [self.run(system, rate, s) for s in range(self.args.seeds)]
        row: dict[str, Any] = {
            "system": system,
            "rate": rate,
            "mean_s": float(np.mean([r["mean_s"] for r in runs])),
            "p95_s": float(np.mean([r["p95_s"] for r in runs])),
            "runs": runs,
        }
        if system in STATIC:
            pred = predict(self.curves, self.plan(system, rate).allocation, rate)
            row["pred_mean_s"], row["pred_p95_s"] = pred.mean_s, pred.p95_s
            row["gpus_used"] = self.plan(system, rate).gpus_used
        return row


# -- parts ---------------------------------------------------------------------------------


def part_shares(args: argparse.Namespace) -> None:
    rows = []
    print("\n### LLM time shares (`plan shares`, 200 workflows on hetero-16, seed 0)\n")
    print("| workload | e2e CV | LLM time CV | per model: share (CV; CV where called) |")
    print("|---|---|---|---|")
    for wl in (*PATTERNS, "agentic-mix"):
        rep = measure_shares(wl, workflows=200, seed=0)
        rows.append(rep.to_dict())
        cells = "; ".join(
            f"{m.model} {m.share_mean:.2f} ({m.share_cv:.2f}"
            + (f"; {m.share_cv_present:.2f}" if m.present_fraction < 1 else "")
            + ")"
            for m in rep.models
        )
        print(f"| {wl} | {rep.e2e_cv:.2f} | {rep.llm_time_cv:.2f} | {cells} |", flush=True)
    _out(args, "shares", rows)


def part_validate(args: argparse.Namespace) -> None:
    run = Runner(args, args.cluster, args.workload)
    print(f"\n### Predictor vs simulation ({args.workload} on {args.cluster}, {args.router})\n")
    print(
        "| allocation | rate (wps) | predicted mean | simulated mean | error | predicted p95 "
        "| simulated p95 | error |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for system in STATIC:
        thr = min(run.plan(system, 1.0).prediction.throughput_wps, args.rate_hi)
        for frac in (0.25, 0.5, 0.75):
            rate = round(frac * thr, 3)
            row = run.point(system, rate)
            e_mean = row["pred_mean_s"] / row["mean_s"] - 1
            e_p95 = row["pred_p95_s"] / row["p95_s"] - 1
            row.update(err_mean=e_mean, err_p95=e_p95)
            rows.append(row)
            print(
                f"| {system} | {rate:g} | {row['pred_mean_s']:.1f} | {row['mean_s']:.1f} | "
                f"{e_mean:+.0%} | {row['pred_p95_s']:.1f} | {row['p95_s']:.1f} | {e_p95:+.0%} |",
                flush=True,
            )
    errs = [abs(r["err_mean"]) for r in rows if math.isfinite(r["err_mean"])]
    print(f"\nmean |error| of the mean: {np.mean(errs):.1%}, max {np.max(errs):.1%}")
    _out(args, f"validate-{args.workload}-{Path(args.cluster).stem}", rows)


def _sweep_one(run: Runner, system: str, rates: list[float], slo: float) -> dict[str, Any]:
    """Rates in increasing order until the SLO breaks, then bisect once between."""
    rows, best, first_bad = [], 0.0, None
    for rate in rates:
        row = run.point(system, rate)
        rows.append(row)
        if row["p95_s"] <= slo:
            best = rate
        else:
            first_bad = rate
            break
    for _ in range(run.args.bisect):
        if first_bad is None:
            break
        mid = round((best + first_bad) / 2, 3) if best > 0 else round(first_bad / 2, 3)
        row = run.point(system, mid)
        rows.append(row)
        if row["p95_s"] <= slo:
            best = mid
        else:
            first_bad = mid
    return {"system": system, "max_rate_at_slo": best, "points": rows}


def part_sweep(args: argparse.Namespace) -> None:
    systems = [s for s in args.systems.split(",") if s]
    results: dict[str, Any] = {}
    for cluster in args.clusters.split(","):
        for wl in args.workloads.split(","):
            wall = time.perf_counter()
            run = Runner(args, cluster, wl)
            slo = run.slo()
            rates = [float(r) for r in args.rates.split(",")]
            out = {s: _sweep_one(run, s, rates, slo) for s in systems}
            key = f"{wl}@{cluster}"
            results[key] = {"slo_p95_s": slo, "systems": out}
            _print_sweep(key, slo, out, time.perf_counter() - wall)
            _out(args, f"sweep-{args.tag}", results)


def _print_sweep(key: str, slo: float, out: dict[str, Any], wall: float) -> None:
    print(f"\n### {key}: SLO p95 <= {slo:.1f} s ({wall:.0f} s of runs)\n")
    print("| system | rate (wps): mean / p95 s | max rate at SLO |")
    print("|---|---|---|")
    for s, r in out.items():
        pts = sorted(r["points"], key=lambda p: p["rate"])
        cells = ", ".join(f"{p['rate']:g}: {p['mean_s']:.0f} / {p['p95_s']:.0f}" for p in pts)
        print(f"| {s} | {cells} | {r['max_rate_at_slo']:g} |")
    plan = out.get("plan", {}).get("max_rate_at_slo")
    if plan:
        ratios = ", ".join(
            f"{s} {plan / r['max_rate_at_slo']:.2f}x" if r["max_rate_at_slo"] > 0 else f"{s} inf"
            for s, r in out.items()
            if s != "plan"
        )
        print(f"\nplan's max rate at SLO over: {ratios}", flush=True)


def part_timing(args: argparse.Namespace) -> None:
    prof = workload_profile(args.workload)
    print(f"\n### Planning time against cluster size ({args.workload})\n")
    print("| cluster | GPUs | rate (wps) | planning time (s) | search steps | GPUs used |")
    print("|---|---|---|---|---|---|")
    rows = []
    for n in (8, 16, 32, 86, 172, 342):
        spec = get_cluster(f"hetero-{n}")
        gpus = sum(s.gpus for s in spec.servers)
        rate = n / 4
        times, last = [], None
        for _ in range(3):
            t = time.perf_counter()
            last = search_plan(spec, prof, rate)
            times.append(time.perf_counter() - t)
        assert last is not None
        row = {
            "cluster": spec.name,
            "gpus": gpus,
            "rate": rate,
            "planning_time_s": min(times),
            "steps": last.steps,
            "gpus_used": last.gpus_used,
        }
        rows.append(row)
        print(
            f"| {spec.name} | {gpus} | {rate:g} | {min(times):.2f} | {last.steps} | "
            f"{last.gpus_used:g} |",
            flush=True,
        )
    _out(args, "timing", rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("part", choices=("shares", "validate", "sweep", "timing", "all"))
    ap.add_argument("--out", default="results/plan-study")
    ap.add_argument("--cluster", default="hetero-32")
    ap.add_argument("--workload", default="agentic-mix")
    ap.add_argument("--clusters", default="hetero-32")
    ap.add_argument("--workloads", default="agentic-mix")
    ap.add_argument("--systems", default="plan,independent,uniform,eft,heft_online,least_loaded")
    ap.add_argument("--rates", default="1,2,3,4,6,8,11,16,22")
    ap.add_argument(
        "--rate-hi",
        type=float,
        default=16.0,
        help="validate: rates 1/4, 1/2, 3/4 of min(predicted throughput, this)",
    )
    ap.add_argument("--router", default="eft", help="policy routing among pinned replicas")
    ap.add_argument("--workflows", type=int, default=1000)
    ap.add_argument(
        "--horizon", type=float, default=150.0, help="arrivals span at least this many seconds"
    )
    ap.add_argument("--warmup", type=float, default=0.2)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--bisect", type=int, default=1)
    ap.add_argument("--slo-mult", type=float, default=1.5)
    ap.add_argument("--slo-p95", type=float, default=None)
    ap.add_argument("--tag", default="main")
    args = ap.parse_args()
    parts = ("shares", "validate", "sweep", "timing") if args.part == "all" else (args.part,)
    for p in parts:
        globals()[f"part_{p}"](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
