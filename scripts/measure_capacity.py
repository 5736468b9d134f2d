"""Measure capacity for the presets the docs, the study and the tests use, and write the
table shipped with the package (src/scalesched/eval/data/capacity.json).

Usage: python scripts/measure_capacity.py [--clusters hetero-16,hetero-32] [--workloads W,..]

Every figure is reproducible: ``scalesched capacity --cluster C --workload W --remeasure``
measures the same thing with the same seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scalesched.cluster import get_cluster
from scalesched.eval.capacity import cache_key, measure_capacity, store_shipped

DEFAULT_CLUSTERS = "hetero-4,hetero-8,hetero-16,hetero-32,hetero-48,hetero-64"
TABLE = Path(__file__).resolve().parents[1] / "src/scalesched/eval/data/capacity.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clusters", default=DEFAULT_CLUSTERS)
    ap.add_argument("--workloads", default="agentic-mix")
    args = ap.parse_args()
    for cluster in args.clusters.split(","):
        spec = get_cluster(cluster)
        for workload in args.workloads.split(","):
            result = measure_capacity(spec, workload)
            store_shipped({cache_key(spec, workload): result}, TABLE)
            print(
                f"{cluster:>16} {workload:>18}: {result.capacity_wps:.4g} wf/s "
                f"({result.best_policy}; nominal {result.nominal_wps:.4g}; "
                f"{result.measured_s:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
