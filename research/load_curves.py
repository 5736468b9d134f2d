"""Throughput and mean/p99 response against load for the strong heuristics, on several
cluster mixes: the figure and table of docs/steady-state.md.

Usage:
    python research/load_curves.py [--clusters C1,C2,..] [--loads 0.3,0.4,..] [--seeds 2]
        [--workflows 1500] [--jobs 2] [--out docs/img/load_curves.png]

Load is a fraction of each cluster's measured capacity (``scalesched capacity``); every run
excludes the first 20% and the last 10% of its workflows. Seeds 0..K-1 are evaluation seeds.
"""

from __future__ import annotations

import argparse
import csv
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_CLUSTERS = "hetero-16,configs/clusters/edge-l4-cpu.yaml,configs/clusters/a100-lab.yaml"
DEFAULT_LOADS = "0.3,0.4,0.5,0.6,0.7,0.8,0.9,1.0,1.1,1.2"
POLICIES = ("eft", "heft_online", "least_loaded", "kv_aware", "p2c")
ROOT = Path(__file__).resolve().parents[1]


def one_run(args: tuple[str, str, float, int, int]) -> dict[str, Any]:
    from scalesched.runs.setup import Scenario, prepare, run

    cluster, policy, load, seed, workflows = args
    setup = prepare(cluster, Scenario(workflows=workflows, load=load, seed=seed))
    m = run(setup, policy).metrics  # the study's warm-up and cool-down
    keys = (
        "avg_response_time_s",
        "p99_response_time_s",
        "throughput_wps",
        "offered_rate_wps",
        "steady_state",
        "p99_slowdown",
        "mean_gpu_utilization",
    )
    return {"cluster": setup.cluster.name, "policy": policy, "load": load, "seed": seed} | {
        k: m[k] for k in keys
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--clusters", default=DEFAULT_CLUSTERS)
    ap.add_argument("--loads", default=DEFAULT_LOADS)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--workflows", type=int, default=1500)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "docs/img/load_curves.png")
    ap.add_argument(
        "--from-csv", action="store_true", help="Only redraw the figure from the CSV beside it."
    )
    args = ap.parse_args()
    if args.from_csv:
        with args.out.with_suffix(".csv").open() as fh:
            rows = [{**r, "load": float(r["load"])} for r in csv.DictReader(fh)]
        loads = sorted({r["load"] for r in rows})
        plot(rows, [], loads, args.out)
        return

    from scalesched.cluster import get_cluster
    from scalesched.runs.capacity import capacity_wps

    clusters = args.clusters.split(",")
    for c in clusters:  # measure (or read) capacity once, before the pool
        print(f"{c}: capacity {capacity_wps(get_cluster(c), 'agentic-mix'):.3g} wf/s", flush=True)
    loads = [float(x) for x in args.loads.split(",")]
    work = [
        (c, p, load, s, args.workflows)
        for c in clusters
        for p in POLICIES
        for load in loads
        for s in range(args.seeds)
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(one_run, work, chunksize=4))
    csv_path = args.out.with_suffix(".csv")
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, clusters, loads, args.out)
    print(f"wrote {csv_path} and {args.out}")


def plot(rows: list[dict[str, Any]], clusters: list[str], loads: list[float], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import ScalarFormatter

    names = list(dict.fromkeys(r["cluster"] for r in rows))
    fig, axes = plt.subplots(3, len(names), figsize=(4.2 * len(names), 9), squeeze=False)
    colours = dict(zip(POLICIES, plt.get_cmap("tab10").colors, strict=False))
    for j, name in enumerate(names):
        for p in POLICIES:
            sel = [r for r in rows if r["cluster"] == name and r["policy"] == p]

            def series(key: str, sel: list[dict[str, Any]] = sel) -> list[float]:
                return [
                    float(np.mean([float(r[key]) for r in sel if r["load"] == x])) for x in loads
                ]

            style = {"color": colours[p], "marker": "o", "ms": 3, "label": p}
            axes[0, j].plot(loads, series("throughput_wps"), **style)
            axes[1, j].plot(loads, series("avg_response_time_s"), **style)
            axes[2, j].plot(loads, series("p99_response_time_s"), **style)
        offered = [
            float(
                np.mean(
                    [
                        float(r["offered_rate_wps"])
                        for r in rows
                        if r["cluster"] == name and r["load"] == x
                    ]
                )
            )
            for x in loads
        ]
        axes[0, j].plot(loads, offered, "k:", label="offered")
        axes[0, j].set_title(name)
        axes[0, j].set_ylabel("throughput (workflows/s)")
        axes[1, j].set_ylabel("mean response (s)")
        axes[2, j].set_ylabel("p99 response (s)")
        axes[2, j].set_xlabel("load (fraction of measured capacity)")
        for i in (1, 2):
            axes[i, j].set_yscale("log")
            axes[i, j].yaxis.set_major_formatter(ScalarFormatter())
            axes[i, j].yaxis.set_minor_formatter(ScalarFormatter())
            axes[i, j].tick_params(axis="y", which="minor", labelsize=7)
        for i in range(3):
            axes[i, j].set_xticks(loads, [f"{x:g}" for x in loads], fontsize=8)
            axes[i, j].grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
