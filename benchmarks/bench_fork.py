"""How long ``Simulation.fork`` takes on a running simulation, against ``copy.deepcopy`` of
the same simulation (what a lookahead policy would do without it), side by side.

    python benchmarks/bench_fork.py --cluster hetero-16 --in-flight 100 --repeats 30

The target (docs/benchmarks.md): <= 5 ms per fork on hetero-16 with 100 workflows in flight.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.decision.cycle import drive
from scalesched.policies import get_policy
from scalesched.sim.engine import Simulation
from scalesched.sim.scenario import Scenario, build_jobs


def running(cluster: str, in_flight: int, workflows: int, rate: float) -> Simulation:
    """A simulation of eft driven until ``in_flight`` workflows are in the system."""
    spec = get_cluster(cluster)
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=workflows, rate=rate, seed=1))
    sim = Simulation(spec, jobs, tables=tables)
    policy = get_policy("eft")
    policy.reset(0)
    if drive(sim, policy, until=lambda: sim.in_system >= in_flight) is None:
        raise SystemExit(f"the run ended before {in_flight} workflows were in flight")
    return sim


def timed(fn: object, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()  # type: ignore[operator]
        out.append(time.process_time() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", default="hetero-16")
    parser.add_argument("--in-flight", type=int, default=100)
    parser.add_argument("--workflows", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=3.2, help="workflows/s (over capacity fills)")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    sim = running(args.cluster, args.in_flight, args.workflows, args.rate)
    forks = timed(sim.fork, args.repeats)
    deep = timed(lambda: copy.deepcopy(sim), max(3, args.repeats // 10))
    print(
        f"{args.cluster}, {sim.in_system} workflows in flight at t = {sim.now:.1f} s, "
        f"{sim.tasks.n_tasks} tasks in the run (CPU ms)"
    )
    for name, times in (("fork", forks), ("deepcopy", deep)):
        print(f"{name}: median {1e3 * statistics.median(times):.2f}, best {1e3 * min(times):.2f}")
    print(f"deepcopy / fork (medians): {statistics.median(deep) / statistics.median(forks):.0f}x")


if __name__ == "__main__":
    main()
