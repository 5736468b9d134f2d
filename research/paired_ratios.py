"""Seed-paired ratios of response-time statistics from a ``scalesched eval`` results.csv.

    python research/paired_ratios.py results/tail08/results.csv --reference eft

For every policy, size and load: the mean over seeds of mean/p50/p95/p99 response time,
and the mean over seeds of (policy / reference on the same seed) with a 95% Student-t
half-width (docs/tail.md).
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict

import numpy as np

from scalesched.stats import mean_ci_text, paired_ratios

STATS = ("avg_response_time_s", "p50_response_time_s", "p95_response_time_s", "p99_response_time_s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--reference", default="eft")
    args = ap.parse_args()
    runs: dict[str, dict[tuple[str, str, str], dict[str, str]]] = defaultdict(dict)
    with open(args.csv) as fh:
        for row in csv.DictReader(fh):
            runs[row["policy"]][(row["n_servers"], row["load"], row["seed"])] = row
    ref = runs[args.reference]
    print("| policy | mean | p50 | p95 | p99 | mean / ref | p50 / ref | p95 / ref | p99 / ref |")
    print("|---|---|---|---|---|---|---|---|---|")
    for policy, rows in runs.items():
        keys = sorted(rows)
        level = [np.mean([float(rows[k][s]) for k in keys]) for s in STATS]
        cells = [f"{v:.1f}" for v in level]
        for s in STATS:
            mine = {k: float(rows[k][s]) for k in keys}
            cells.append(
                mean_ci_text(paired_ratios(mine, {k: float(r[s]) for k, r in ref.items()}))
            )
        print(f"| {policy} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
