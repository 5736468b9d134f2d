"""Memory planner speed: MILP solve, replay and brute force (figures in docs/benchmarks.md).

    taskset -c 1 python benchmarks/bench_memplan.py [--reps 3] [--time-limit 60]

Per setting (model, GPU, batch x 2048): the MILP's wall time (scipy.optimize.milp, HiGHS;
building the arrays included), its status and gap, the replay of its plan, and the max-batch
search (one feasibility solve per probe).  Then brute force against the MILP at L = 8.
Times are the best of ``--reps`` runs.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from scalesched.memplan import milp
from scalesched.memplan.brute import brute_force
from scalesched.memplan.costs import hardware, train_costs
from scalesched.memplan.planner import max_batch
from scalesched.memplan.replay import replay
from scalesched.memplan.study import small_instance

T = TypeVar("T")
SETTINGS = (
    ("llama-2-7b", "L4-24G", 8),
    ("llama-2-7b", "H100-80G", 8),
    ("codellama-34b", "A100-80G", 8),
    ("llama-2-70b", "L4-24G", 8),
    ("llama-2-70b", "H100-80G", 8),
)


def best_of(reps: int, fn: Callable[[], T]) -> tuple[float, T]:
    best, out = math.inf, None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    assert out is not None
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    print("| model | GPU | batch | layers | MILP s | status | gap | replay ms | max batch ", end="")
    print("| search s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, gpu, batch in SETTINGS:
        hw = hardware(gpu, cpu_mem_gb=2048.0)
        c = train_costs(model, gpu, batch, 2048, hw)
        t_milp, res = best_of(args.reps, partial(milp.solve, c, time_limit_s=args.time_limit))
        assert res.plan is not None
        t_rep, _ = best_of(args.reps, partial(replay, c, res.plan))
        t0 = time.perf_counter()
        mb = max_batch(model, hw, 2048, "milp", time_limit_s=args.time_limit)
        t_mb = time.perf_counter() - t0
        print(
            f"| {model} | {gpu} | {batch} | {c.layers} | {t_milp:.2f} | {res.status} "
            f"| {res.gap:.1e} | {t_rep * 1e3:.1f} | {mb} | {t_mb:.1f} |",
            flush=True,
        )
    c = small_instance(8, gpu="L4-24G", gpu_frac=0.3, cpu_frac=0.3, seed=6)
    t_bf, bf = best_of(1, lambda: brute_force(c))
    t_m, res = best_of(args.reps, lambda: milp.solve(c))
    print(
        f"\nL = 8 (all state modes): brute force {bf.plans_checked} plans in {t_bf:.2f} s, "
        f"MILP {t_m * 1e3:.1f} ms; equal: {abs(bf.iteration_s - res.objective_s) < 1e-9}"
    )


if __name__ == "__main__":
    main()
