"""``rollout_oracle`` on the compiled core against the Python engine: the same run (hetero-16,
agentic-mix, models loaded on demand, load 0.9, seed 5), CPU seconds of each, the
trials in C++ (``sim.compiled_run.compiled_trials``) on the compiled core and Python forks
on the other; the two must give the same response times. Then the same for ``rollout``
(sampled futures: one Python fork per future taken over). Then the compiled core alone on
the issue's run (``--workflows-compiled``, 1500 by default), and the cost of one C++ fork:
taking the Python state over (``adopt``, once per rolled-out decision) and copying it
(``fork``, once per candidate), timed at open decisions of a tail-driven run of the same
jobs.

    taskset -c 1 nice -n 5 python benchmarks/bench_rollout_core.py --workflows 100
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from scalesched.policies import get_policy  # noqa: E402
from scalesched.runs.setup import Scenario, prepare, run  # noqa: E402
from scalesched.sim import compiled_run  # noqa: E402
from scalesched.sim.core import CORE_ENV, compiled_available  # noqa: E402

POLICY = "rollout_oracle:horizon_s=60"
SAMPLED = "rollout:horizon_s=60"


def timed(setup: Any, core: str, name: str = POLICY) -> tuple[float, dict[str, float], Any]:
    """(CPU seconds, the policy's stats, the result) of one run of ``name`` on ``core``."""
    os.environ[CORE_ENV] = core
    try:
        policy = get_policy(name)
        t0 = time.process_time()
        result = run(setup, policy, warmup=0)
        return time.process_time() - t0, dict(policy.stats), result  # type: ignore[attr-defined]
    finally:
        del os.environ[CORE_ENV]


def fork_cost(setup: Any, decisions: int) -> tuple[float, float]:
    """Mean CPU seconds of taking the state over and of one copy of it, at open decisions
    50 to ``decisions`` of a tail-driven run on the compiled core."""
    from scalesched.sim.engine import Simulation

    sim = Simulation(setup.cluster, setup.jobs, tables=setup.tables, core="compiled")
    base = get_policy("tail")
    adopt_s, copy_s, seen = 0.0, 0.0, 0
    decision = sim.next_decision()
    while decision is not None and seen < decisions:
        if seen >= 50:  # past the start: jobs in flight
            t0 = time.process_time()
            run_ = compiled_run.adopted(sim, base)
            t1 = time.process_time()
            for _ in range(10):
                run_.fork()
            adopt_s += t1 - t0
            copy_s += (time.process_time() - t1) / 10
        seen += 1
        sim.apply(base.select(decision))
        decision = sim.next_decision()
    counted = max(1, seen - 50)
    return adopt_s / counted, copy_s / counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workflows", type=int, default=100)
    parser.add_argument("--workflows-compiled", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    if not compiled_available():
        raise SystemExit("the compiled core is not built in this install (see docs/install.md)")
    scenario = Scenario(workflows=args.workflows, load=0.9, seed=args.seed)
    setup = prepare("hetero-16", scenario, stream=False)
    py_s, py_stats, py = timed(setup, "python")
    cc_s, cc_stats, cc = timed(setup, "compiled")
    if py.response_times.tobytes() != cc.response_times.tobytes():
        raise AssertionError("the cores gave different response times")
    print(f"{POLICY}, hetero-16, agentic-mix, dynamic residency, load 0.9, seed {args.seed}")
    print(
        f"{args.workflows} workflows: python {py_s:.1f} CPU s, compiled {cc_s:.2f} CPU s "
        f"({py_s / cc_s:.1f}x); {int(cc_stats['rolled'])} rolled-out decisions, "
        f"{int(cc_stats['changed'])} changed (python: {int(py_stats['changed'])}); per "
        f"rolled-out decision {1e3 * py_s / py_stats['rolled']:.1f} ms -> "
        f"{1e3 * cc_s / cc_stats['rolled']:.2f} ms"
    )
    py_s, py_stats, py = timed(setup, "python", SAMPLED)
    cc_s, cc_stats, cc = timed(setup, "compiled", SAMPLED)
    if py.response_times.tobytes() != cc.response_times.tobytes():
        raise AssertionError("the cores gave different response times (sampled)")
    print(
        f"{SAMPLED}, {args.workflows} workflows: python {py_s:.1f} CPU s, compiled "
        f"{cc_s:.2f} CPU s ({py_s / cc_s:.1f}x); per rolled-out decision "
        f"{1e3 * py_s / py_stats['rolled']:.1f} ms -> {1e3 * cc_s / cc_stats['rolled']:.2f} ms"
    )
    big = prepare(
        "hetero-16",
        Scenario(workflows=args.workflows_compiled, load=0.9, seed=args.seed),
        stream=False,
    )
    big_s, big_stats, big_run = timed(big, "compiled")
    print(
        f"{args.workflows_compiled} workflows, compiled: {big_s:.1f} CPU s "
        f"({big_s / 60:.2f} CPU-minutes), {int(big_stats['rolled'])} rolled-out decisions, "
        f"mean response {float(big_run.response_times.mean()):.2f} s"
    )
    adopt_s, copy_s = fork_cost(big, 400)
    adopt_us, copy_us = 1e6 * adopt_s, 1e6 * copy_s
    print(f"one C++ fork: adopt {adopt_us:.0f} us (once per decision), copy {copy_us:.1f} us")


if __name__ == "__main__":
    main()
