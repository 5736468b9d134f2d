"""Where the simulator's time goes: cProfile of ``scalesched simulate`` (the library call the
CLI makes), grouped by part of the execution model, and the cost per event against a bare
``heapq`` push + pop (benchmarks/bench_sim.py's floor), measured in the same process.

    taskset -c 0 nice -n 5 python benchmarks/profile_sim.py --cluster hetero-48 \\
        --workflows 3000 --policy eft

Two timed runs: one under cProfile (for the shares: cProfile's own cost per call inflates
the small, hot functions, so shares are indicative) and one plain (for the per-event cost).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import time
from typing import Any

from scalesched.decision.cycle import drive
from scalesched.runs.setup import Scenario, prepare, run

# Function -> part of the model (by name; the rest is "other").
GROUPS: dict[str, tuple[str, ...]] = {
    "event loop (pop + dispatch, run loop)": (
        "next_decision",
        "_push",
        "heappush",
        "heappop",
        "simulate",
    ),
    "arrivals (DAG ranks, lower bounds)": ("_on_arrive", "arrive", "upward_ranks", "lower_bound"),
    "decision build (features)": (
        "make_decision",
        "transfer_times",
        "admission_slots",
        "request",
        "prefill_s",
        "_task_request",
        "task_request",
    ),
    "policy choice (eft select)": ("select", "_score", "argmin"),
    "placement (apply, launch, book, inputs)": (
        "apply",
        "accept",
        "_launch",
        "launch",
        "book",
        "_move_inputs",
        "move_inputs",
    ),
    "LLM engines (land, admit, prefill, decode)": (
        "_on_land",
        "on_land",
        "_llm_arrive",
        "request_gpus",
        "start_load",
        "on_load_done",
        "evict_for",
        "serve_gpu_wait",
    ),
    "tools (cores, outside wait)": (
        "start_tool",
        "on_cpu_done",
        "after_cpu",
        "cpu_account",
        "_on_task_done",
    ),
    "completion + readiness (ledger)": (
        "_finish",
        "finish",
        "unassign",
        "release_children",
        "make_ready",
        "release_deferred",
        "task_finished",
        "workflow_finished",
        "rank",
        "pop_pending",
        "may_defer",
    ),
}


def group_of(func: tuple[str, int, str]) -> str:
    path, _, name = func
    if path.endswith("llm_serving.py"):  # the decode path, whatever its functions' names
        return "LLM engines (land, admit, prefill, decode)"
    for group, names in GROUPS.items():
        if name in names or any(name.endswith(f".{n}") for n in names):
            return group
    if path.endswith(("features.py", "perf.py")):
        return "decision build (features)"
    return "other"


def grouped(raw: dict) -> dict[str, float]:
    """Own time per part; a built-in or library function's time (numpy, heapq, max) goes to
    the parts of its callers, split as the profile's caller edges split it."""
    out: dict[str, float] = {}
    for func, (_, _, tt, _, callers) in raw.items():
        group = group_of(func)
        if group != "other" or not callers:
            out[group] = out.get(group, 0.0) + tt
            continue
        edge_total = sum(edge[2] for edge in callers.values()) or 1.0
        for caller, edge in callers.items():
            part = group_of(caller)
            out[part] = out.get(part, 0.0) + tt * edge[2] / edge_total
    return out


def decode_events(setup: Any, policy: str) -> tuple[int, int, int, int]:
    """(decode events that finish requests, decode events popped without doing so, heap
    pushes saved by lazy rescheduling, LLM requests) of one run. Before the lazy
    rescheduling (2026-12-01) every reschedule pushed an event and the superseded ones were
    popped and dropped (counted as events); now an engine keeps one live event that
    re-times itself when it fires early (``LlmServing.reschedule``)."""
    from scalesched.policies import get_policy
    from scalesched.sim.engine import Simulation
    from scalesched.sim.events import DECODE

    counts = [0]
    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables)
    on_decode = sim._handlers[DECODE]

    def counting(key: int, version: int) -> None:
        counts[0] += 1
        on_decode(key, version)

    sim._handlers[DECODE] = counting
    scheduler = get_policy(policy)
    scheduler.reset(setup.scenario.seed)
    drive(sim, scheduler)
    llm = sum(t.kind == "llm" for j in setup.jobs for t in j.workflow.tasks)
    return counts[0], sim.decode_skipped, sim.decode_retimes, llm


def main() -> None:
    from bench_sim import bare_heap_loop  # the floor, as bench_sim measures it

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cluster", default="hetero-48")
    parser.add_argument("--workflows", type=int, default=3000)
    parser.add_argument("--policy", default="eft")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    setup = prepare(args.cluster, Scenario(workflows=args.workflows, seed=args.seed))

    t0 = time.perf_counter()
    result = run(setup, args.policy)
    plain = time.perf_counter() - t0
    events, decisions = int(result.metrics["events"]), int(result.metrics["decisions"])

    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.runcall(run, setup, args.policy)
    profiled = time.perf_counter() - t0
    stats = pstats.Stats(profiler)
    raw: dict = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in raw.values())

    floor = bare_heap_loop(max(events, 100_000), 1024)
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {args.cluster}, {args.workflows} workflows, "
        f"{args.policy}, seed {args.seed}"
    )
    print(
        f"\nplain run: {plain:.2f} s, {events:,} events, {decisions:,} decisions: "
        f"{events / plain:,.0f} events/s, {1e6 * plain / events:.1f} µs/event; bare heapq "
        f"push + pop {1e6 * floor:.2f} µs: {plain / events / floor:.0f}x the floor; "
        f"{1e6 * plain / decisions:.1f} µs per decision (events included)"
    )
    print(f"profiled run: {profiled:.2f} s (cProfile overhead {profiled / plain:.1f}x)")
    due, skipped, saved, llm = decode_events(setup, args.policy)
    print(
        f"decode events: {due:,} finishing requests ({llm:,} LLM requests); {skipped:,} more "
        f"popped without finishing one (superseded or re-timed: {skipped / (due + skipped):.0%} "
        f"of decode pops); {saved:,} reschedules pushed no event (lazy rescheduling)"
    )

    by_group = grouped(raw)
    print("\n| part (own time of its functions and of the built-ins they call) | share |")
    print("|---|---|")
    for group, tt in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"| {group} | {tt / total:.0%} |")

    print("\n| function | calls | own time share | with callees share |")
    print("|---|---|---|---|")
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])[: args.top]
    for (path, line, name), (_, calls, tt, ct, _) in rows:
        where = f"{os.path.basename(path)}:{line}" if line else "built-in"
        print(f"| `{name}` ({where}) | {calls:,} | {tt / total:.1%} | {ct / total:.1%} |")


if __name__ == "__main__":
    main()
