"""Seed-paired ratios (policy / reference on the same seed) with 95% Student-t half-widths,
for response mean and p95, TTFT p95 and the prefix hit rate, over several eval results.csv.

    python research/cache_feature_ratios.py --reference eft --label PATH=NAME ... \\
        results.csv [results.csv ...]
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict

import numpy as np

from scalesched.stats import mean_ci_text

STATS = ("avg_response_time_s", "p95_response_time_s", "ttft_p95_s", "prefix_hit_rate")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--reference", default="eft")
    ap.add_argument("--label", action="append", default=[], help="POLICY=NAME")
    args = ap.parse_args()
    labels = dict(x.split("=", 1) for x in args.label)
    runs: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for path in args.csv:
        with open(path) as fh:
            for row in csv.DictReader(fh):
                name = labels.get(row["policy"], row["policy"])
                runs[name][row["seed"]] = row
    ref = runs[labels.get(args.reference, args.reference)]
    print(
        "| policy | seeds | measured wf/run | mean s | p95 s | TTFT p95 s | prefix hit "
        "| re-entry moved | mean / ref | p95 / ref | TTFT p95 / ref | prefix hit / ref |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for policy, rows in runs.items():
        keys = sorted(k for k in rows if k in ref)
        level = [np.mean([float(rows[k][s]) for k in keys]) for s in STATS]
        ratios = [np.array([float(rows[k][s]) / float(ref[k][s]) for k in keys]) for s in STATS]
        measured = {rows[k]["measured_workflows"] for k in keys}
        cells = [str(len(keys)), "/".join(sorted(measured))]
        cells += [f"{v:.1f}" for v in level[:2]] + [f"{level[2]:.3f}", f"{level[3]:.3f}"]
        moved = np.mean([float(rows[k]["reentry_moved_rate"]) for k in keys])
        cells.append(f"{moved:.2f}")
        cells += [mean_ci_text(r) for r in ratios]
        print(f"| {policy} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
