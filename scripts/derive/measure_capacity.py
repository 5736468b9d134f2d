"""Measure capacity for the presets the docs, the study and the tests use, and write the
table shipped with the package (src/scalesched/runs/data/capacity.json).

Usage: python scripts/derive/measure_capacity.py [--clusters hetero-16,hetero-32] [--workloads W,..]
       python scripts/derive/measure_capacity.py --envsched [--mixes m1,m2]   # EnvSched's settings
       python scripts/derive/measure_capacity.py --method fast --clusters hetero-512,hetero-1024
       python scripts/derive/measure_capacity.py --method planned   # the planned-deployment world

``--method full`` (the default) is the 30-run search every shipped figure up to hetero-256
comes from; ``--method fast`` is what a cache miss runs (large clusters scaled from the
largest cached one of their mix), stored under its own key; ``--method planned`` is the
planned-deployment world's fixed point (``scalesched.runs.world``).

Every figure is reproducible: ``scalesched capacity --cluster C --workload W --remeasure``
measures the same thing with the same seed.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from scalesched.cluster import get_cluster
from scalesched.cluster.model import ClusterSpec
from scalesched.runs.capacity import (
    FAST_METHOD,
    PLANNED_METHOD,
    CapacityResult,
    cache_key,
    estimate_capacity,
    measure_capacity,
    store_shipped,
)
from scalesched.runs.world import measure_planned_capacity

DEFAULT_CLUSTERS = "hetero-4,hetero-8,hetero-16,hetero-32,hetero-48,hetero-64"
TABLE = Path(__file__).resolve().parents[2] / "src/scalesched/runs/data/capacity.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clusters", default=DEFAULT_CLUSTERS)
    ap.add_argument("--workloads", default="agentic-mix")
    ap.add_argument(
        "--envsched", action="store_true", help="Measure every 16-server mix x pattern of EnvSched."
    )
    ap.add_argument("--mixes", default="", help="With --envsched: only these mixes.")
    ap.add_argument("--method", choices=("full", "fast", "planned"), default="full")
    ap.add_argument(
        "--table", type=Path, default=TABLE, help="Table to add to (one per parallel process)."
    )
    args = ap.parse_args()
    pairs: list[tuple[ClusterSpec, str]] = []
    if args.envsched:
        from scalesched.env.settings import MIXES, PATTERN_NAMES, EnvSetting

        mixes = args.mixes.split(",") if args.mixes else list(MIXES)
        for mix in mixes:
            spec = EnvSetting("agentic-mix", 0.7, mix, 50).cluster()
            pairs += [(spec, w) for w in PATTERN_NAMES]
    else:
        for cluster in args.clusters.split(","):
            pairs += [(get_cluster(cluster), w) for w in args.workloads.split(",")]
    for spec, workload in pairs:
        result: CapacityResult
        if args.method == "full":
            result = measure_capacity(spec, workload)
            key = cache_key(spec, workload)
        elif args.method == "planned":
            result = measure_planned_capacity(spec, workload)
            key = cache_key(spec, workload, method=PLANNED_METHOD)
        else:
            result = estimate_capacity(spec, workload)
            key = cache_key(spec, workload, method=FAST_METHOD)
        store_shipped({key: result}, args.table)
        how = f"scaled from {result.scaled_from}" if result.scaled_from else result.best_policy
        print(
            f"{spec.name:>16} {workload:>18}: {result.capacity_wps:.4g} wf/s "
            f"({how}; nominal {result.nominal_wps:.4g}; {result.measured_s:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
