"""How much of eft's p99 response any router could remove (docs/tail.md).

    python research/tail_lower_bound.py [--policies eft,tail] [--seeds 0,1,2] [--load 0.8]

Every workflow's response time is at least its contention-free lower bound (each task alone
on its fastest server), so every quantile of response is at least the same quantile of the
lower bounds. This prints, per policy and seed on hetero-16 agentic-mix (1500 workflows,
the study's window): p99 of response, p99 of the lower bound over the same measured
workflows, and their ratio.
"""

from __future__ import annotations

import argparse

import numpy as np

from scalesched.runs.setup import Scenario, prepare, run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policies", default="eft,tail")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--load", type=float, default=0.8)
    args = ap.parse_args()
    for seed in (int(s) for s in args.seeds.split(",")):
        scenario = Scenario(workload="agentic-mix", workflows=1500, load=args.load, seed=seed)
        setup = prepare("hetero-16", scenario)
        for policy in args.policies.split(","):
            r = run(setup, policy)
            p99 = float(np.percentile(r.response_times, 99))
            lb99 = float(np.percentile(r.lower_bounds, 99))
            print(
                f"seed {seed} {policy:10s} p99 response {p99:7.1f} s  p99 lower bound "
                f"{lb99:7.1f} s  bound/p99 {lb99 / p99:.3f}"
            )


if __name__ == "__main__":
    main()
