"""The capacity-aware bound, whole program against its Lagrangian form
(``scalesched.eval.headroom.lagrange``): value and wall seconds of each on the window
``headroom`` measures (the 2.5% warm-up and 10% run-out cut off), on the world a command
would run in (planned by default).

    python benchmarks/bench_capacity_bound.py --workflows 300 --samples 100 --whole
    python benchmarks/bench_capacity_bound.py --workflows 1000 --samples 100,50
    python benchmarks/bench_capacity_bound.py --workflows 300 --samples 100 --whole --allocations

``--allocations``: the program over every allocation of the cluster's GPUs instead
(``scalesched.eval.headroom.allocation``).

The Lagrangian value must never exceed the whole program's (weak duality); the script says
so if it does.
"""

from __future__ import annotations

import argparse
import functools
import time

from scalesched.eval.headroom.allocation import allocation_bound
from scalesched.eval.headroom.bound import capacity_bound
from scalesched.eval.headroom.lagrange import lagrangian_capacity_bound
from scalesched.runs.setup import Scenario, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--workload", default="agentic-mix")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--residency", default="planned")
    parser.add_argument("--samples", default="100", help="comma-separated sample sizes")
    parser.add_argument("--whole", action="store_true", help="also solve the whole program")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--allocations", action="store_true", help="the bound over allocations")
    args = parser.parse_args()
    scenario = Scenario(
        workload=args.workload,
        workflows=args.workflows,
        load=args.load,
        seed=args.seed,
        residency=args.residency,
    )
    setup = prepare(args.cluster, scenario, stream=False)
    n = args.workflows
    jobs = sorted(setup.jobs, key=lambda j: (j.arrival, j.workflow_id))
    window = jobs[n // 40 : n - n // 10]
    span = window[-1].arrival - window[0].arrival
    rate = (len(window) - 1) / span
    if setup.scenario.rate is not None:
        rate = min(rate, setup.scenario.rate)
    print(f"{args.cluster} {setup.world.plan or setup.world.name}: {len(window)} measured")
    whole = None
    solve_whole = (
        functools.partial(allocation_bound, sample=0) if args.allocations else capacity_bound
    )
    priced = allocation_bound if args.allocations else lagrangian_capacity_bound
    if args.whole:
        started = time.perf_counter()
        got = solve_whole(setup.tables, window, rate, jobs, time_limit_s=args.time_limit)
        whole = got.mean_s
        print(f"whole program: {whole} ({got.status}) in {time.perf_counter() - started:.1f} s")
    for sample in (int(s) for s in args.samples.split(",")):
        started = time.perf_counter()
        got = priced(setup.tables, window, rate, jobs, sample=sample, time_limit_s=args.time_limit)
        took = time.perf_counter() - started
        print(f"lagrangian, sample {sample}: {got.mean_s} ({got.status}) in {took:.1f} s")
        if whole is not None and got.mean_s is not None and got.mean_s > whole * (1 + 1e-7):
            print("ERROR: the Lagrangian value exceeds the whole program's")


if __name__ == "__main__":
    main()
