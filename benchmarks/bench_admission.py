"""TAO's admission DP against the exact MILP (HiGHS): optimality gap and solve time.

    python benchmarks/bench_admission.py --seeds 50

For every (sessions, nodes) shape and seed, one random instance
(scalesched.cache.admission.random_problem: 64-block nodes, footprints of 1/16 to 1/2 of a
node, node-specific cache credit); both solvers run on it side by side in one process.
Prints a Markdown table: instances, DP gap to the optimum (mean and max, as a fraction of
the optimal value), instances over 2%, and mean solve times with their ratio.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from scalesched.cache.admission import random_problem, solve_dp, solve_milp

SHAPES = ((6, 2), (10, 3), (16, 4), (24, 6), (32, 8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="instances per shape")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    rows = []
    for sessions, nodes in SHAPES:
        gaps, t_dp, t_milp = [], [], []
        for seed in range(args.seeds):
            problem = random_problem(sessions, nodes, seed=seed)
            dp, exact = solve_dp(problem), solve_milp(problem)
            assert problem.feasible(dp.node_of) and exact.optimal
            gaps.append(1 - dp.total_value / exact.total_value if exact.total_value > 0 else 0)
            t_dp.append(dp.solve_time_s)
            t_milp.append(exact.solve_time_s)
        rows.append(
            {
                "sessions": sessions,
                "nodes": nodes,
                "instances": args.seeds,
                "gap_mean": float(np.mean(gaps)),
                "gap_max": float(np.max(gaps)),
                "over_2pct": int(np.sum(np.array(gaps) > 0.02)),
                "dp_ms": 1e3 * float(np.mean(t_dp)),
                "milp_ms": 1e3 * float(np.mean(t_milp)),
            }
        )
    if args.json:
        print(json.dumps(rows))
        return
    print("| sessions x nodes | instances | DP gap mean | DP gap max | over 2% | DP ms | MILP ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['sessions']} x {r['nodes']} | {r['instances']} | {r['gap_mean']:.3%} | "
            f"{r['gap_max']:.2%} | {r['over_2pct']} | {r['dp_ms']:.1f} | {r['milp_ms']:.1f} |"
        )


if __name__ == "__main__":
    main()
