"""The planner's predicted mean response against simulation, across cluster mixes and rates.

For each mix of ``MIXES`` and each fraction of ``FRACTIONS`` of the mix's capacity: plan a
deployment for that rate (``search_plan``), simulate it with ``tail`` for ``--workflows``
workflows (MSER-5 warm-up, batch-means 95% interval, steady verdict), and write the
plan's predicted mean beside the simulated one. docs/planning-accuracy.md is this script's
``table`` output.

Mixes are split, before any fitting, into a *fitting* set (the only runs the queueing
model's constants may be tuned on) and a *held-out* set (the target: every held-out rate
within 10%). The split is the ``role`` column of ``MIXES``; it is never changed after
looking at results.

Capacity of a mix (``capacity``; stored in ``--out``/capacity.jsonl and reused, so every
model version is checked at the same rates): the highest rate the planner finds a finite
plan for (bisection on its predicted throughput), checked by simulation: that plan,
offered 1.25 times the rate, delivers some window throughput; capacity is the lower of the
two. So 0.9 of capacity is 0.9 of what the planned deployment both predicts and sustains.

Commands (from the repository root; each resumes where its output stops)::

    nice python research/plan_accuracy.py capacity --out results/plan-accuracy
    nice python research/plan_accuracy.py sweep --out results/plan-accuracy --tag after
    nice python research/plan_accuracy.py sweep --out results/plan-accuracy --tag after
    python research/plan_accuracy.py table --out results/plan-accuracy --tag after
    python research/plan_accuracy.py repredict --out results/plan-accuracy --tag before
    nice python research/plan_accuracy.py spot --points hetero-16@4.74,hetero-32@24.2

``repredict`` re-scores a sweep's stored deployments with the installed predictor, without
simulating again (how a model change is judged on the fitting mixes before re-planning).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scalesched.cluster import get_cluster
from scalesched.cluster.deployment import deployment_from_dict, deployment_to_dict
from scalesched.cluster.model import ClusterSpec
from scalesched.plan.pipeline import Curves, ReplicaConfig, predict
from scalesched.plan.profile import workload_profile
from scalesched.plan.search import PlanResult, search_plan
from scalesched.runs.setup import Scenario, prepare, run

WORKLOAD = "agentic-mix"
POLICY = "tail"


@dataclass(frozen=True)
class Mix:
    name: str
    cluster: str
    role: str
    """``fit``: constants may be tuned on it; ``held-out``: never."""


MIXES = (
    Mix("hetero-8", "hetero-8", "fit"),
    Mix("example-lab", "configs/clusters/example-lab.yaml", "fit"),
    Mix("pcie-lab", "configs/clusters/pcie-lab.yaml", "fit"),
    Mix("h100x8-4", "homogeneous-4:h100-80g-x8", "fit"),
    Mix("hetero-16", "hetero-16", "held-out"),
    Mix("hetero-32", "hetero-32", "held-out"),
    Mix("skewed-1h-16", "configs/train/clusters/skewed-1h-16.yaml", "held-out"),
    Mix("a100-lab", "configs/clusters/a100-lab.yaml", "held-out"),
    Mix("a100-heavy-20", "configs/clusters/a100-heavy-20.yaml", "held-out"),
    Mix("edge-l4-cpu", "configs/clusters/edge-l4-cpu.yaml", "held-out"),
    Mix("l4-lab", "configs/clusters/l4-lab.yaml", "held-out"),
    Mix("one-cpu-box-13", "configs/clusters/one-cpu-box-13.yaml", "held-out"),
)
FRACTIONS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
OVERLOAD = 1.25
"""The capacity probe offers this multiple of the planner's highest rate."""
CAPACITY_SEED = 7
RUN_SEED = 11
"""Seed of every sweep run (arrivals and the workflows drawn); the planner's sample
workflows keep their own default seed, so prediction and simulation see different draws."""
TARGET = 0.10
PROBE_SPAN_S = 240.0
"""A capacity probe's arrivals span at least this long: a backlogged run's window
throughput is low when the run is only a few response times long (hetero-32 read 22 wf/s
with 3000 workflows at 51 offered)."""
RUN_SPAN_S = 200.0
"""A sweep run's arrivals span at least this long (several times the mean response)."""
GROW_LIMIT = 4
"""A run the verdict calls not steady, or whose interval is wider than ``PRECISION`` of its
mean, is run again at twice its length, up to this many times the first length (as
``--workflows auto`` grows a run): the verdict's delivered-rate test fails on short runs of
long-tailed responses near capacity, and low-rate mixes need more workflows for a few-%
interval. The table keeps the last run of each point and marks it if it is still not
steady."""
PRECISION = 0.05


def workflows_for(rate: float, least: int, span_s: float) -> int:
    """At least ``least`` workflows, and enough for the arrivals to span ``span_s``."""
    return max(least, math.ceil(rate * span_s))


class Planner:
    """One workload profile and its curves, shared by every plan of a study."""

    def __init__(self) -> None:
        self.profile = workload_profile(WORKLOAD)
        self.curves = Curves(self.profile)

    def plan(self, spec: ClusterSpec, rate: float) -> PlanResult:
        return search_plan(spec, self.profile, rate, curves=self.curves)

    def highest_rate(self, spec: ClusterSpec, steps: int = 14) -> float:
        """The highest rate with a finite predicted mean, by doubling then bisection."""
        lo, hi = 0.0, 0.5
        while math.isfinite(self.plan(spec, hi).prediction.mean_s):
            lo, hi = hi, 2 * hi
        for _ in range(steps):
            mid = 0.5 * (lo + hi)
            if math.isfinite(self.plan(spec, mid).prediction.mean_s):
                lo = mid
            else:
                hi = mid
        return lo


def simulate_plan(
    spec: ClusterSpec,
    result: PlanResult,
    rate: float,
    workflows: int,
    seed: int,
    *,
    fixed_window: bool = False,
) -> dict[str, Any]:
    """``tail`` on the plan's deployment at ``rate``. ``fixed_window``: drop the first 20%
    and last 10% (the capacity probe's window, for a backlogged run) instead of MSER-5."""
    dep = deployment_from_dict(
        deployment_to_dict("plan", spec.name, result.replicas), spec, "plan-accuracy"
    )
    setup = prepare(
        spec, Scenario(workload=WORKLOAD, workflows=workflows, rate=rate, seed=seed), deployment=dep
    )
    started = time.process_time()
    window = (
        {"warmup": round(0.2 * workflows), "cooldown": round(0.1 * workflows)}
        if fixed_window
        else {}
    )
    m = run(setup, POLICY, **window).metrics
    return {
        "sim_mean_s": float(m["avg_response_time_s"]),
        "sim_ci_s": float(m["avg_response_time_ci_s"]),
        "sim_p95_s": float(m["p95_response_time_s"]),
        "steady": bool(m["steady_state"]),
        "steady_reason": str(m["steady_reason"]),
        "warmup_workflows": int(m["warmup_workflows"]),
        "throughput_wps": float(m["throughput_wps"]),
        "sim_cpu_s": round(time.process_time() - started, 1),
    }


def allocation_rows(result: PlanResult) -> list[list[Any]]:
    """The allocation as JSON rows ``[model, gpu type, tp, share, count]``."""
    return [
        [m, c.gpu_type, c.tp, c.share, n]
        for m, counts in result.allocation.items()
        for c, n in sorted(counts.items())
    ]


def allocation_of(rows: list[list[Any]]) -> dict[str, dict[ReplicaConfig, int]]:
    out: dict[str, dict[ReplicaConfig, int]] = {}
    for m, gpu, tp, share, n in rows:
        out.setdefault(m, {})[ReplicaConfig(gpu, int(tp), float(share))] = int(n)
    return out


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def _selected(names: str | None) -> list[Mix]:
    if not names:
        return list(MIXES)
    wanted = set(names.split(","))
    return [m for m in MIXES if m.name in wanted]


def cmd_capacity(args: argparse.Namespace) -> None:
    path = args.out / "capacity.jsonl"
    done = {r["mix"] for r in _read_jsonl(path)}
    planner = Planner()
    for mix in _selected(args.mixes):
        if mix.name in done:
            continue
        spec = get_cluster(mix.cluster)
        highest = planner.highest_rate(spec)
        result = planner.plan(spec, highest)
        offered = OVERLOAD * highest
        n = workflows_for(offered, args.workflows, PROBE_SPAN_S)
        probe = simulate_plan(spec, result, offered, n, CAPACITY_SEED, fixed_window=True)
        _append(
            path,
            {
                "mix": mix.name,
                "cluster": mix.cluster,
                "role": mix.role,
                "planner_highest_wps": highest,
                "offered_wps": offered,
                "delivered_wps": probe["throughput_wps"],
                "capacity_wps": min(highest, probe["throughput_wps"]),
                "gpus_used": result.gpus_used,
                "workflows": n,
                "seed": CAPACITY_SEED,
            },
        )


def cmd_sweep(args: argparse.Namespace) -> None:
    caps = {r["mix"]: r for r in _read_jsonl(args.out / "capacity.jsonl")}
    path = args.out / f"sweep-{args.tag}.jsonl"
    last = {(r["mix"], r["fraction"]): r for r in _read_jsonl(path)}
    planner = Planner()
    fractions = [float(f) for f in args.fractions.split(",")] if args.fractions else FRACTIONS
    for mix in _selected(args.mixes):
        if mix.name not in caps:
            print(f"{mix.name}: no capacity yet (run `capacity` first)", file=sys.stderr)
            continue
        spec = get_cluster(mix.cluster)
        capacity = float(caps[mix.name]["capacity_wps"])
        for frac in fractions:
            rate = frac * capacity
            n = workflows_for(rate, args.workflows, RUN_SPAN_S)
            before = last.get((mix.name, frac))
            if before is not None:
                precise = before["sim_ci_s"] <= PRECISION * before["sim_mean_s"]
                if (before["steady"] and precise) or before["workflows"] >= GROW_LIMIT * n:
                    continue
                n = 2 * before["workflows"]
            wall = time.perf_counter()
            result = planner.plan(spec, rate)
            plan_s = time.perf_counter() - wall
            pred = result.prediction
            row: dict[str, Any] = {
                "mix": mix.name,
                "role": mix.role,
                "fraction": frac,
                "capacity_wps": capacity,
                "rate_wps": rate,
                "pred_mean_s": pred.mean_s,
                "pred_throughput_wps": pred.throughput_wps,
                "gpus_used": result.gpus_used,
                "plan_s": round(plan_s, 3),
                "workflows": n,
                "seed": RUN_SEED,
                "allocation": allocation_rows(result),
            }
            row.update(simulate_plan(spec, result, rate, n, RUN_SEED))
            row["error"] = row["pred_mean_s"] / row["sim_mean_s"] - 1
            _append(path, row)


def cmd_repredict(args: argparse.Namespace) -> None:
    """The installed predictor on a sweep's stored deployments (no new simulation)."""
    planner = Planner()
    rows = _read_jsonl(args.out / f"sweep-{args.tag}.jsonl")
    for r in rows:
        pred = predict(planner.curves, allocation_of(r["allocation"]), r["rate_wps"])
        r["pred_mean_s"] = pred.mean_s
        r["error"] = pred.mean_s / r["sim_mean_s"] - 1
    _print_table(rows, args.role, full=args.full)


def cmd_table(args: argparse.Namespace) -> None:
    _print_table(_read_jsonl(args.out / f"sweep-{args.tag}.jsonl"), args.role, full=args.full)


def _print_table(rows: list[dict[str, Any]], role: str, *, full: bool) -> None:
    """Per mix: predicted / simulated +- CI / error at each fraction (``full``: one row per
    point), then the largest miss per mix. A point run more than once keeps its last run."""
    last = {(r["mix"], r["fraction"]): r for r in rows}
    keep = [r for r in last.values() if role == "all" or r["role"] == role]
    mixes = list(dict.fromkeys(r["mix"] for r in keep))
    if full:
        print(
            "| mix | load | rate (wf/s) | workflows | predicted (s) | simulated (s) | error "
            "| steady |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in keep:
            print(
                f"| {r['mix']} | {r['fraction']:.1f} | {r['rate_wps']:.3g} | {r['workflows']} | "
                f"{r['pred_mean_s']:.1f} | {r['sim_mean_s']:.1f} ± {r['sim_ci_s']:.1f} | "
                f"{100 * r['error']:+.0f}% | {'yes' if r['steady'] else 'no'} |"
            )
        print()
    fracs = sorted({r["fraction"] for r in keep})
    print("| mix | capacity (wf/s) | " + " | ".join(f"{f:.1f}" for f in fracs) + " | worst |")
    print("|---|---|" + "---|" * len(fracs) + "---|")
    within = total = unsteady = 0
    for mix in mixes:
        by = {r["fraction"]: r for r in keep if r["mix"] == mix}
        cells = []
        for f in fracs:
            r = by.get(f)
            if r is None:
                cells.append("")
                continue
            mark = "" if r["steady"] else " (not steady)"
            cells.append(f"{100 * r['error']:+.0f}%{mark}")
            if r["steady"]:  # a run the verdict rejects is no yardstick
                total += 1
                within += abs(r["error"]) <= TARGET
            else:
                unsteady += 1
        worst = max(by.values(), key=lambda r: abs(r["error"]))
        cap = next(iter(by.values()))["capacity_wps"]
        print(
            f"| {mix} | {cap:.3g} | "
            + " | ".join(cells)
            + f" | {100 * worst['error']:+.0f}% at {worst['fraction']:.1f} |"
        )
    print(
        f"\n{within}/{total} steady points within {100 * TARGET:.0f}%; "
        f"{unsteady} not steady (not counted)"
    )


def cmd_spot(args: argparse.Namespace) -> None:
    """Re-check a few points at given rates (``--points mix@rate,...``): a new planner's
    plans, one run each (no growing), printed beside the prediction."""
    paths = {m.name: m.cluster for m in MIXES}
    planner = Planner()
    for point in (args.points or "").split(","):
        mix, rate_text = point.split("@")
        spec, rate = get_cluster(paths[mix]), float(rate_text)
        result = planner.plan(spec, rate)
        workflows = workflows_for(rate, args.workflows, RUN_SPAN_S)
        sim = simulate_plan(spec, result, rate, workflows, RUN_SEED)
        error = result.prediction.mean_s / sim["sim_mean_s"] - 1
        print(
            f"| {mix} | {rate:g} | {workflows} | {result.prediction.mean_s:.1f} | "
            f"{sim['sim_mean_s']:.1f} ± {sim['sim_ci_s']:.1f} | {100 * error:+.0f}% | "
            f"{'yes' if sim['steady'] else 'no'} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("capacity", "sweep", "repredict", "table", "spot"))
    parser.add_argument("--out", type=Path, default=Path("results/plan-accuracy"))
    parser.add_argument("--tag", default="after", help="names the sweep's file")
    parser.add_argument("--mixes", help="comma-separated mix names (default: all)")
    parser.add_argument("--fractions", help="comma-separated fractions of capacity")
    parser.add_argument("--workflows", type=int, default=3000)
    parser.add_argument("--role", default="held-out", choices=("fit", "held-out", "all"))
    parser.add_argument("--full", action="store_true", help="also one row per run")
    parser.add_argument("--points", help="with spot: comma-separated mix@rate")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    {
        "capacity": cmd_capacity,
        "sweep": cmd_sweep,
        "repredict": cmd_repredict,
        "table": cmd_table,
        "spot": cmd_spot,
    }[args.command](args)


if __name__ == "__main__":
    main()
