"""Static scheduling on WfCommons instances: our HEFT against SAGA's, and the makespans of
HEFT, CPoP, eft and SCALE on every recipe (figures in docs/static.md, "Benchmarks").

    python benchmarks/bench_static.py [--tasks 1000] [--nodes 8] [--reps 3] \
        [--scale runs/x/best.pt] [--network configs/networks/example-4.yaml]

Every recipe is generated with ``wfcommons:RECIPE:TASKS:0`` and scheduled on one network:
a file, or by default ``--nodes`` fully connected nodes with speeds U(0.5, 2) and link
bandwidths U(10, 100) MB/s drawn with numpy seed 0. Times are the best of ``--reps`` runs
on one thread: ours includes building the problem from the networkx graphs, SAGA's is
``HeftScheduler().schedule`` on its own models (converting the graphs is not counted; its
rank cache is cleared before each run). Needs the dev extra (wfcommons, anrg-saga).
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from pathlib import Path

import numpy as np

from scalesched.static import cpop, heft, load_network, lower_bound, static_schedule
from scalesched.static.generate import random_network
from scalesched.static.io import task_graph_from_workflow
from scalesched.workload.wfcommons_gen import RECIPES, generate_instance


def best_of(reps: int, fn: object) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--network", type=Path, default=None)
    ap.add_argument("--scale", default=None, help="SCALE checkpoint (default: shipped 'scale')")
    ap.add_argument("--recipes", default=",".join(RECIPES))
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    logging.disable(logging.WARNING)  # SAGA warns when it adds a super source / sink
    import saga.schedulers.cpop as saga_cpop
    from saga import Network, TaskGraph
    from saga.schedulers.heft import HeftScheduler

    from scalesched.policies.trained import shipped_policies

    scale = args.scale or ("scale" if "scale" in shipped_policies() else None)
    net = (
        load_network(args.network)
        if args.network
        else random_network(
            args.nodes, np.random.default_rng(0), speed=(0.5, 2.0), bandwidth=(1e7, 1e8)
        )
    )
    timing, spans = [], []
    for recipe in args.recipes.split(","):
        tg = task_graph_from_workflow(generate_instance(recipe, args.tasks, 0))
        t_ours, ours = best_of(args.reps, lambda tg=tg: heft(tg, net))
        s_tg, s_net = TaskGraph.from_nx(tg), Network.from_nx(net)

        def run_saga(s_tg: TaskGraph = s_tg, s_net: Network = s_net) -> float:
            saga_cpop.upward_rank.cache_clear()
            return float(HeftScheduler().schedule(s_net, s_tg).makespan)

        t_saga, saga_span = best_of(args.reps, run_saga)
        same = math.isclose(heft(tg, net, convention="saga").makespan, saga_span, rel_tol=1e-9)
        timing.append((recipe, tg.number_of_nodes(), t_ours, t_saga, same))
        row = [lower_bound(tg, net), ours.makespan, cpop(tg, net).makespan]  # type: ignore[attr-defined]
        row.append(static_schedule(tg, net, "eft").makespan)
        row.append(static_schedule(tg, net, scale).makespan if scale else math.nan)
        spans.append((recipe, tg.number_of_nodes(), row))
        print(f"{recipe}: done", flush=True)

    print(
        f"\nHEFT time, {args.tasks}-task instances, {net.number_of_nodes()} nodes "
        f"(best of {args.reps})\n"
    )
    print(
        "| recipe | tasks | ours (s) | SAGA 2.0.2 (s) | SAGA / ours "
        "| same makespan (saga convention) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    for recipe, n, a, b, same in timing:
        print(
            f"| {recipe} | {n} | {a:.3f} | {b:.3f} | {b / a:.1f} "
            f"| {'yes' if same else 'no (ties)'} |"
        )
    total_a = sum(r[2] for r in timing)
    total_b = sum(r[3] for r in timing)
    print(f"| all | | {total_a:.3f} | {total_b:.3f} | {total_b / total_a:.1f} | |")
    print(f"\nMakespan (s) and ratio to the lower bound; SCALE: {scale or 'n/a'}\n")
    print("| recipe | tasks | lower bound | HEFT | CPoP | eft | SCALE |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for recipe, n, row in spans:
        lb = row[0]
        cells = [f"{v:.0f} ({v / lb:.2f})" if not math.isnan(v) else "n/a" for v in row[1:]]
        print(f"| {recipe} | {n} | {lb:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
