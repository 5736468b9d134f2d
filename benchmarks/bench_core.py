"""The compiled core against the pure-Python engine, side by side in one process: events per
CPU-second of the same run with ``SCALESCHED_CORE`` off (python) and on (compiled), at
N = 16 and 48 with eft and tail, decisions included; and the issue's unit, the CPU time per
decision over a bare ``heapq`` push + pop ("heap operations per decision", 120 for eft at
N = 48 on 2026-12-04).

    taskset -c 1 nice -n 5 python benchmarks/bench_core.py --sizes 16,48 --pairs 5
    taskset -c 1 nice -n 5 python benchmarks/bench_core.py --sizes 16,48 --policies scale-dagger
    taskset -c 1 nice -n 5 python benchmarks/bench_core.py --env steady-100,cold-30 --pairs 3
    taskset -c 1 nice -n 5 python benchmarks/bench_core.py --workload coordinator \
        --kv-policy lru --tool-repeat 0.5 --tool-cache --sizes 16,48 --pairs 3

After one untimed run on each core (imports, caches), the two cores alternate (python
first on even pairs, compiled first on odd ones) and each figure is the best of its runs,
so drift in a shared machine's load falls on both; the paired ratio's median and range are
printed too. The timed runs keep no trace (an output a user asks for, not the
simulation); one untimed traced run on each core must give the same trace hash, and every
run the same events, decisions and mean response: a speed-up that changes a result is a
bug, not a speed-up. On the compiled core, eft, tail and p2c runs go whole through C++
(``sim.compiled_run``); a policy in Python (``scale-dagger``, ``soft_eft``...) answers each
decision while the events run in C++ (``sim.compiled_loop``).

``--env`` times the Gymnasium environment instead (``bench_train.py``'s environment-only
steps on hetero-16: eft's server from each decision, resets and warm-ups included), on each
core in turn, paired the same way; the two cores' runs must cut the same episodes (their
observations and rewards are equal by test: ``tests/env/test_env_compiled.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from bench_sim import RATE_PER_SERVER, bare_heap_loop  # noqa: E402

from scalesched.runs.setup import Scenario, prepare, run  # noqa: E402
from scalesched.sim.core import CORE_ENV, compiled_available  # noqa: E402

CORES = ("python", "compiled")


def timed_run(
    setup: Any, policy: str, core: str, *, traced: bool, caches: dict[str, Any]
) -> tuple[float, int, int, str]:
    """(CPU seconds, events, decisions, trace hash or the mean response's hex) of one run
    on ``core`` with ``caches`` (``run``'s ``kv_policy`` and ``tool_cache``); ``traced``
    records the trace (the check runs), else the run keeps none (the timed runs: a trace is
    an output a user asks for, not the simulation)."""
    os.environ[CORE_ENV] = core
    try:
        t0 = time.process_time()
        result = run(setup, policy, warmup=0, record_trace=traced, **caches)
        cpu = time.process_time() - t0
    finally:
        del os.environ[CORE_ENV]
    digest = hashlib.sha256()
    for r in result.trace:
        times = (float(r.ready).hex(), float(r.start).hex(), float(r.end).hex())
        digest.update(repr((r.workflow, r.task, int(r.server), *times)).encode())
    check = digest.hexdigest() if traced else float(result.response_times.mean()).hex()
    return cpu, int(result.metrics["events"]), int(result.metrics["decisions"]), check


def measure(
    n: int, policy: str, workflows: int, seed: int, pairs: int, options: argparse.Namespace
) -> dict[str, Any]:
    scenario = Scenario(
        workload=options.workload,
        workflows=workflows,
        rate=RATE_PER_SERVER * n,
        seed=seed,
        tool_repeat=options.tool_repeat,
    )
    setup = prepare(f"hetero-{n}", scenario, stream=False)
    caches = {"kv_policy": options.kv_policy, "tool_cache": options.tool_cache}
    times: dict[str, list[float]] = {c: [] for c in CORES}
    traces: set[tuple[int, int, str]] = set()
    seen: set[tuple[int, int, str]] = set()
    for core in CORES:  # untimed: imports, the tables' caches, the binding; the traces
        traces.add(timed_run(setup, policy, core, traced=True, caches=caches)[1:])
    for i in range(pairs):
        for core in CORES if i % 2 == 0 else CORES[::-1]:
            cpu, events, decisions, check = timed_run(
                setup, policy, core, traced=False, caches=caches
            )
            times[core].append(cpu)
            seen.add((events, decisions, check))
    if len(seen) != 1 or len(traces) != 1:
        raise AssertionError(f"hetero-{n} {policy}: the cores gave different runs")
    ((events, decisions, _),) = seen
    ratios = [p / c for p, c in zip(times["python"], times["compiled"], strict=True)]
    return {
        "n": n,
        "policy": policy,
        "events": events,
        "decisions": decisions,
        "best": {c: min(times[c]) for c in CORES},
        "ratio_median": statistics.median(ratios),
        "ratio_range": (min(ratios), max(ratios)),
    }


def measure_env(setting: str, steps: int, seed: int, pairs: int) -> dict[str, Any]:
    """Environment steps per CPU-second on each core, best of ``pairs`` alternating runs."""
    from bench_train import SETTINGS, env_only

    rates: dict[str, list[float]] = {c: [] for c in CORES}
    episodes = set()
    for i in range(pairs + 1):  # the first pair untimed: imports, plans, the binding
        for core in CORES if i % 2 == 0 else CORES[::-1]:
            os.environ[CORE_ENV] = core
            try:
                row = env_only(SETTINGS[setting], steps, seed)
            finally:
                del os.environ[CORE_ENV]
            episodes.add(row["steps_per_episode"])
            if i:
                rates[core].append(row["env_steps_per_cpu_s"])
    if len(episodes) != 1:
        raise AssertionError(f"{setting}: the cores cut different episodes")
    ratios = [c / p for p, c in zip(rates["python"], rates["compiled"], strict=True)]
    return {
        "setting": setting,
        "best": {c: max(rates[c]) for c in CORES},
        "ratio_median": statistics.median(ratios),
        "ratio_range": (min(ratios), max(ratios)),
    }


def env_table(settings: str, steps: int, seed: int, pairs: int) -> None:
    print("\n| setting | env steps/CPU-s python | compiled | speed-up (best) | paired (range) |")
    print("|---|---|---|---|---|")
    for name in settings.split(","):
        r = measure_env(name, steps, seed, pairs)
        py, cc = r["best"]["python"], r["best"]["compiled"]
        lo, hi = r["ratio_range"]
        print(
            f"| {name} | {py:,.0f} | {cc:,.0f} | {cc / py:.2f}x "
            f"| {r['ratio_median']:.2f}x ({lo:.2f}-{hi:.2f}) |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="16,48")
    parser.add_argument("--policies", default="eft,tail")
    parser.add_argument("--workflows-per-server", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument(
        "--env", default="", help="time the Gymnasium environment on these settings instead"
    )
    parser.add_argument("--env-steps", type=int, default=5000, help="environment steps per run")
    parser.add_argument("--workload", default="agentic-mix", help="the workload of every run")
    parser.add_argument("--kv-policy", default=None, help="KV reuse across calls (lru, ttl...)")
    parser.add_argument("--tool-repeat", type=float, default=0.0, help="repeated tool calls")
    parser.add_argument("--tool-cache", action="store_true", help="repeats take cached results")
    args = parser.parse_args()
    if not compiled_available():
        raise SystemExit("the compiled core is not built in this install (see docs/install.md)")
    if args.env:
        import torch

        torch.set_num_threads(1)
        env_table(args.env, args.env_steps, args.seed, args.pairs)
        return
    rows = [
        measure(
            int(n),
            policy,
            max(200, args.workflows_per_server * int(n)),
            args.seed,
            args.pairs,
            args,
        )
        for n in args.sizes.split(",")
        for policy in args.policies.split(",")
    ]
    t0 = time.process_time()
    floor = bare_heap_loop(200_000, 1024)
    floor_cpu = (time.process_time() - t0) / 200_000
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; {args.workload}, KV {args.kv_policy}, tool "
        f"repeats {args.tool_repeat} cache {args.tool_cache}; "
        f"{args.pairs} pairs, best CPU time of each core; "
        f"bare heapq push + pop {1e6 * floor:.2f} us ({1e6 * floor_cpu:.2f} us CPU)"
    )
    print(
        "\n| N | policy | events | decisions | events/CPU-s python | events/CPU-s compiled "
        "| speed-up (best) | paired speed-up median (range) | heap ops per decision "
        "python -> compiled |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        py, cc = r["best"]["python"], r["best"]["compiled"]
        lo, hi = r["ratio_range"]
        per_decision = [t / r["decisions"] / floor_cpu for t in (py, cc)]
        print(
            f"| {r['n']} | {r['policy']} | {r['events']:,} | {r['decisions']:,} "
            f"| {r['events'] / py:,.0f} | {r['events'] / cc:,.0f} | {py / cc:.2f}x "
            f"| {r['ratio_median']:.2f}x ({lo:.2f}-{hi:.2f}) "
            f"| {per_decision[0]:.0f} -> {per_decision[1]:.0f} |"
        )


if __name__ == "__main__":
    main()
