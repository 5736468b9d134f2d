"""Simulator speed: events/s and decisions/s with eft at several cluster sizes, and the cost
per event as a ratio to a bare ``heapq`` loop doing the same pushes and pops (the floor).

Run on one core:  taskset -c 0 python benchmarks/bench_sim.py  (writes a Markdown table).
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import random
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from scalesched.cluster import get_cluster  # noqa: E402
from scalesched.policies import get_policy  # noqa: E402
from scalesched.policies.features import ClusterTables, make_decision  # noqa: E402
from scalesched.sim.engine import Simulation  # noqa: E402
from scalesched.sim.scenario import Scenario, build_jobs  # noqa: E402


def bare_heap_loop(events: int, heap_size: int) -> float:
    """Seconds per event for heappop + heappush of the simulator's 5-tuples."""
    rng = random.Random(0)
    heap = [(rng.random(), i, 0, i, 0) for i in range(heap_size)]
    heapq.heapify(heap)
    seq = heap_size
    start = time.perf_counter()
    for _ in range(events):
        t, _, kind, a, b = heapq.heappop(heap)
        seq += 1
        heapq.heappush(heap, (t + rng.random(), seq, kind, a, b))
    return (time.perf_counter() - start) / events


def run_once(n: int, workflows: int, seed: int) -> dict[str, float]:
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    jobs = build_jobs(tables, Scenario(workflows=workflows, load=0.7, seed=seed))
    policy = get_policy("eft")
    policy.reset(seed)
    sim = Simulation(spec, jobs, tables=tables)
    heap_peak = 0
    start = time.perf_counter()
    d = sim.next_decision()
    while d is not None:
        sim.apply(policy.select(d))
        heap_peak = max(heap_peak, len(sim._heap))
        d = sim.next_decision()
    wall = time.perf_counter() - start
    # Decision cost alone: rebuild the last kinds of decision on the final state.
    probe = Simulation(spec, jobs[:50], tables=tables)
    d = probe.next_decision()
    requests = []
    while d is not None and len(requests) < 200:
        requests.append(d.task)
        probe.apply(policy.select(d))
        d = probe.next_decision()
    reps = max(1, 4000 // len(requests))
    t0 = time.perf_counter()
    for _ in range(reps):
        for req in requests:
            policy.select(make_decision(tables, probe, req))
    per_decision = (time.perf_counter() - t0) / (reps * len(requests))
    floor = bare_heap_loop(max(sim.events, 100_000), max(heap_peak, 16))
    return {
        "n": n,
        "events": sim.events,
        "decisions": sim.decisions,
        "wall_s": wall,
        "events_per_s": sim.events / wall,
        "decisions_per_s": sim.decisions / wall,
        "us_per_event": 1e6 * wall / sim.events,
        "floor_us_per_event": 1e6 * floor,
        "decision_us": 1e6 * per_decision,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="16,48,256,1024")
    parser.add_argument("--workflows-per-server", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        rows.append(run_once(n, max(200, args.workflows_per_server * n), args.seed))
    base = rows[0]["decision_us"]
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        "| N | events | decisions | events/s | decisions/s | us/event | bare heapq us/event "
        "| ratio | eft decision us | decision cost vs N=16 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['n']} | {r['events']} | {r['decisions']} | {r['events_per_s']:,.0f} | "
            f"{r['decisions_per_s']:,.0f} | {r['us_per_event']:.1f} | "
            f"{r['floor_us_per_event']:.2f} | {r['us_per_event'] / r['floor_us_per_event']:.0f}x "
            f"| {r['decision_us']:.1f} | {r['decision_us'] / base:.2f}x (N ratio "
            f"{r['n'] / rows[0]['n']:.0f}x) |"
        )


if __name__ == "__main__":
    main()
