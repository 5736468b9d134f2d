"""Events per CPU-second of one simulator run, for comparing two checkouts side by side.

Usage (run alternately, on one core; the best of three repeats each):
    git worktree add /tmp/before <rev>
    for i in 1 2; do
      PYTHONPATH=/tmp/before/src taskset -c 1 python benchmarks/bench_engine_versions.py before
      taskset -c 1 python benchmarks/bench_engine_versions.py after
    done

hetero-16, agentic-mix at 3.0 workflows/s (a rate, so both checkouts see the same arrivals
whatever their --load means), 1500 workflows, seed 5, eft. CPU time, not wall time, so a
busy machine disturbs it less.
"""

from __future__ import annotations

import sys
import time

from scalesched.cluster import get_cluster
from scalesched.cluster.tables import ClusterTables
from scalesched.policies import get_policy
from scalesched.sim.run import simulate
from scalesched.sim.scenario import Scenario, build_jobs


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "this checkout"
    spec = get_cluster("hetero-16")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=1500, rate=3.0, seed=5))
    best = float("inf")
    events = 0
    for _ in range(3):
        start = time.process_time()
        events = int(simulate(spec, jobs, get_policy("eft"), tables=tables).metrics["events"])
        best = min(best, time.process_time() - start)
    print(f"{label}: {events} events, {events / best:,.0f} events per CPU-second ({best:.3f} s)")


if __name__ == "__main__":
    main()
