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
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("SCALESCHED_CORE", "python")  # the Python engine's figures

from scalesched.cluster import get_cluster  # noqa: E402
from scalesched.cluster.tables import ClusterTables  # noqa: E402
from scalesched.decision.cycle import Watched, drive  # noqa: E402
from scalesched.decision.features import make_decision  # noqa: E402
from scalesched.policies import get_policy  # noqa: E402
from scalesched.runs.setup import Scenario, build_jobs  # noqa: E402
from scalesched.sim.engine import Simulation  # noqa: E402


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


def recorded_requests(probe: Simulation, policy: Any, count: int) -> list[Any]:
    """The first ``count`` requests ``policy`` places in ``probe`` (which it advances), to
    time the decision build on real states."""
    requests: list[Any] = []
    recorder = Watched(policy, lambda d, _: requests.append(d.task))
    drive(probe, recorder, until=lambda: len(requests) >= count)
    return requests


def run_once(n: int, workflows: int, seed: int) -> dict[str, float]:
    spec = get_cluster(f"hetero-{n}")
    tables = ClusterTables(spec)
    # A fixed rate per server, not --load: hetero-1024 has no measured capacity, and a load
    # would start a capacity search (hours) before the first timed event.
    jobs = build_jobs(tables, Scenario(workflows=workflows, rate=RATE_PER_SERVER * n, seed=seed))
    policy = get_policy("eft")
    policy.reset(seed)
    sim = Simulation(spec, jobs, tables=tables)
    heap_peak = 0
    # Time spent building decisions and choosing, to separate it from the event engine.
    decide = [0.0]
    real_make = sim._make_decision

    def timed_make(*args: object) -> object:
        t0 = time.perf_counter()
        out = real_make(*args)
        decide[0] += time.perf_counter() - t0
        return out

    sim._make_decision = timed_make  # type: ignore[assignment]
    start = time.perf_counter()
    peak = [0]
    timed = Watched(policy, lambda *_: peak.__setitem__(0, max(peak[0], sim.events_pending)))
    drive(sim, timed)
    decide[0] += timed.select_s
    heap_peak = peak[0]
    wall = time.perf_counter() - start
    # Decision cost alone: rebuild the last kinds of decision on the final state.
    probe = Simulation(spec, jobs[:50], tables=tables)
    requests = recorded_requests(probe, policy, 200)
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
        "engine_us_per_event": 1e6 * (wall - decide[0]) / sim.events,
        "floor_us_per_event": 1e6 * floor,
        "decision_us": 1e6 * per_decision,
    }


def paired(other: str, n: int, workflows: int, seed: int, pairs: int) -> None:
    """Before/after in one process: the same eft run with this checkout's package and with
    ``other`` (an older checkout's ``scalesched`` copied under another name, see
    docs/benchmarks.md), alternated ``pairs`` times, CPU time each; on a shared machine a
    paired ratio is steadier than two separate series."""
    import importlib
    import statistics

    def runner(pkg: str) -> tuple[object, object]:
        setup = importlib.import_module(f"{pkg}.eval.setup")
        prepared = setup.prepare(
            f"hetero-{n}",
            setup.Scenario(workflows=workflows, rate=RATE_PER_SERVER * n, seed=seed),
            stream=False,
        )
        return setup.run, prepared

    runs = {"after": runner("scalesched"), "before": runner(other)}
    times: dict[str, list[float]] = {"after": [], "before": []}
    events: dict[str, int] = {}
    for i in range(pairs):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            run, prepared = runs[name]
            t0 = time.process_time()
            result = run(prepared, "eft")  # type: ignore[operator]
            times[name].append(time.process_time() - t0)
            events[name] = int(result.metrics["events"])
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    floor = bare_heap_loop(100_000, 1024)
    print(f"hetero-{n}, {workflows} workflows, eft, seed {seed}, {pairs} pairs (CPU s)")
    for name in ("before", "after"):
        best = min(times[name])
        print(
            f"{name}: {events[name]:,} events, best {best:.3f} s, median "
            f"{statistics.median(times[name]):.3f} s; best per event of before: "
            f"{1e6 * best / events['before']:.1f} us = {best / events['before'] / floor:.0f}x "
            f"the floor ({1e6 * floor:.2f} us)"
        )
    print(
        f"paired ratio after/before: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )


def paired_decisions(other: str, n: int, passes: int) -> None:
    """``make_decision`` of this checkout against ``other``'s on the same recorded requests
    and state (hetero-``n``, 400 requests of an eft run), the arrays checked byte for byte,
    then timed a pass of all requests each, alternated ``passes`` times."""
    import importlib
    import statistics

    old = importlib.import_module(f"{other}.decision.features")
    spec = get_cluster(f"hetero-{n}")
    tables, old_tables = ClusterTables(spec), old.ClusterTables(spec)
    scenario = Scenario(workflows=max(200, 3 * n), rate=RATE_PER_SERVER * n, seed=0)
    jobs = build_jobs(tables, scenario)
    policy = get_policy("eft")
    policy.reset(0)
    probe = Simulation(spec, jobs[: len(jobs) // 2], tables=tables)
    requests = recorded_requests(probe, policy, 400)
    fields = ("mask", "transfer_s", "wait_s", "load_s", "exec_s", "finish_s", "imposed_s")
    for req in requests:
        a, b = make_decision(tables, probe, req), old.make_decision(old_tables, probe, req)
        for f in fields:
            x, y = getattr(a, f), getattr(b, f)
            assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), f"{f} differs"
    sides = {"after": (make_decision, tables), "before": (old.make_decision, old_tables)}
    times: dict[str, list[float]] = {"after": [], "before": []}
    for i in range(passes):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            fn, t = sides[name]
            t0 = time.perf_counter()
            for req in requests:
                fn(t, probe, req)
            times[name].append((time.perf_counter() - t0) / len(requests))
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"make_decision, hetero-{n}, {len(requests)} requests, arrays identical; best "
        f"{1e6 * min(times['before']):.1f} us before, {1e6 * min(times['after']):.1f} us after; "
        f"paired ratio after/before median {statistics.median(ratios):.2f} "
        f"(quartiles {q1:.2f}-{q3:.2f}) over {passes} passes"
    )


RATE_PER_SERVER = 6.2 / 48
"""Workflows/s per server of the paired runs: about load 0.7 of agentic-mix on hetero-48
(given as a rate, so no capacity measurement runs first)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="16,48,256,1024")
    parser.add_argument("--workflows-per-server", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--against",
        help="package name of an older checkout (paired before/after runs, see paired())",
    )
    parser.add_argument("--pairs", type=int, default=10)
    args = parser.parse_args()
    if args.against:
        for n in (int(x) for x in args.sizes.split(",")):
            paired(args.against, n, max(200, args.workflows_per_server * n), args.seed, args.pairs)
            paired_decisions(args.against, n, 4 * args.pairs)
        return
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        rows.append(run_once(n, max(200, args.workflows_per_server * n), args.seed))
    base = rows[0]["decision_us"]
    print(
        f"machine: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        "| N | events | decisions | events/s | decisions/s | us/event (all) "
        "| us/event (engine only) | bare heapq us/event | ratio all / engine only "
        "| eft decision us | decision cost vs N=16 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        floor = r["floor_us_per_event"]
        print(
            f"| {r['n']} | {r['events']} | {r['decisions']} | {r['events_per_s']:,.0f} | "
            f"{r['decisions_per_s']:,.0f} | {r['us_per_event']:.1f} | "
            f"{r['engine_us_per_event']:.1f} | {floor:.2f} | "
            f"{r['us_per_event'] / floor:.0f}x / {r['engine_us_per_event'] / floor:.0f}x "
            f"| {r['decision_us']:.1f} | {r['decision_us'] / base:.2f}x "
            f"(N ratio {r['n'] / rows[0]['n']:.0f}x) |"
        )


if __name__ == "__main__":
    main()
